// Package containerdconfig writes the configuration of a private containerd
// (Debian's 1.6, or 1.7 and 2.x built by hack/build-containerd.sh: CRI on,
// every path under one directory), as the tests' node runtime and the local
// cluster's nodes run it.
package containerdconfig

import (
	"fmt"
	"strings"
)

// Options place one containerd.
type Options struct {
	// Dir holds its root, state, opt and runc directories.
	Dir string
	// Socket is its gRPC (and CRI) socket.
	Socket string
	// SandboxImage is the pause image its pods use.
	SandboxImage string
	// CNIBinDir and CNIConfDir are where its CRI plugin finds CNI.
	CNIBinDir, CNIConfDir string
	// PlainHTTPRegistries are registry hosts (host:port) its CRI plugin
	// pulls from over plain HTTP: a registry on this machine, as the
	// kubelet tier runs one. None: every registry over HTTPS, the default.
	PlainHTTPRegistries []string
}

// TOML is the configuration file's content.
func TOML(o Options) string {
	return fmt.Sprintf(`version = 2
root = "%[1]s/root"
state = "%[1]s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "%[2]s"

[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/opt"
# containerd 2 starts NRI by default on one host-wide socket
# (/var/run/nri/nri.sock): two private containerds at once (the test
# packages run in parallel) then fail to start, and a killed one leaves the
# socket behind on the host. Nothing here uses NRI; the socket path is the
# instance's own in case a version ignores disable.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
  socket_path = "%[1]s/nri.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[3]s"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Without CAP_SYS_RESOURCE (as in some VMs) a sandbox's negative
  # oom_score_adj fails every pod.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "%[1]s/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[4]s"
    conf_dir = "%[5]s"
`, o.Dir, o.Socket, o.SandboxImage, o.CNIBinDir, o.CNIConfDir) + registries(o.PlainHTTPRegistries)
}

// registries are CRI mirrors that send each host's pulls to itself over
// plain HTTP (containerd 1.6's registry.mirrors).
func registries(hosts []string) string {
	var b strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&b, `  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%[1]q]
    endpoint = [%[2]q]
`, h, "http://"+h)
	}
	return b.String()
}
