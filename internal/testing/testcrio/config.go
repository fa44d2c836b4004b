//go:build linux

package testcrio

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// ConfigOptions places one CRI-O: every path it would otherwise take from
// /etc, /var/lib or /var/run lies under Dir unless set here. Two instances
// (or a host CRI-O) must never share state, and cleanup must find all of it.
// The tests leave everything under Dir; hack/kubecluster's CRI-O nodes set
// Root and Socket to the paths a real node has (in the node's mount
// namespace) and the CNI directories to the node's own.
type ConfigOptions struct {
	Dir string
	// Root is the storage root, the image filesystem (default Dir/root).
	Root string
	// Socket is where CRI-O listens (default Dir/crio.sock).
	Socket string
	// BinDir holds pinns (hack/build-crio.sh's output).
	BinDir       string
	PauseImage   string
	PinnedImages []string
	// CNIConfDir and CNIPluginDir: network_dir and plugin_dirs (default
	// Dir/cni/conf and Dir/cni/bin).
	CNIConfDir, CNIPluginDir string
}

// Config is crio.conf for o.
func Config(o ConfigOptions) string {
	d := func(p string) string { return filepath.Join(o.Dir, p) }
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	runc, _ := exec.LookPath("runc")
	conmon, _ := exec.LookPath("conmon")
	return fmt.Sprintf(`[crio]
root = %q
runroot = %q
storage_driver = "overlay"
log_dir = %q
version_file = %q
version_file_persist = %q
clean_shutdown_file = %q

[crio.api]
listen = %q
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
# No systemd runs here; cgroupfs is what a non-systemd node uses.
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
container_exits_dir = %q
container_attach_socket_dir = %q
namespaces_dir = %q
pinns_path = %q
hooks_dir = [%q]
cdi_spec_dirs = [%q]
# The host's /etc/crio may ask for these; the tests want none.
default_mounts_file = ""
irqbalance_config_file = %q
irqbalance_config_restore_file = "disable"

[crio.runtime.runtimes.runc]
runtime_path = %q
runtime_root = %q
monitor_path = %q
monitor_cgroup = "pod"

[crio.image]
pause_image = %q
pause_command = "/pause"
signature_policy = %q
signature_policy_dir = %q
pinned_images = [%s]
# A pull's blobs wait here until they are committed; the host's /var/tmp
# would mix this instance's pulls with others'.
big_files_temporary_dir = %q

[crio.network]
network_dir = %q
plugin_dirs = [%q]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`,
		or(o.Root, d("root")), d("run"), d("pods"), d("run/version"), d("version"), d("clean.shutdown"),
		or(o.Socket, d("crio.sock")),
		d("run/exits"), d("run/attach"), d("run/ns"), filepath.Join(o.BinDir, "pinns"), d("hooks.d"), d("cdi"),
		d("irqbalance"),
		runc, d("run/runc"), conmon,
		o.PauseImage, d("policy.json"), d("policies"), quoteList(o.PinnedImages), d("tmp"),
		or(o.CNIConfDir, d("cni/conf")), or(o.CNIPluginDir, d("cni/bin")))
}

// Args are crio's arguments for an instance configured in dir (crio.conf,
// registries.conf and policy.json written there): --config-dir and the
// registries flags keep the host's /etc/crio and /etc/containers out of
// it, so only what the caller wrote applies.
func Args(dir string) []string {
	return []string{
		"--config", filepath.Join(dir, "crio.conf"),
		"--config-dir", filepath.Join(dir, "conf.d"),
		"--registries-conf", filepath.Join(dir, "registries.conf"),
		"--registries-conf-dir", filepath.Join(dir, "registries.d"),
		"--log-level", "info",
	}
}

// Dirs are the directories under an instance's dir that must exist before
// it starts.
var Dirs = []string{"conf.d", "registries.d", "hooks.d", "cni/conf", "cni/bin", "pods", "tmp"}

func (c *CRIO) config() string {
	return Config(ConfigOptions{Dir: c.Dir, Socket: c.Socket, BinDir: c.bin, PauseImage: SandboxImage, PinnedImages: c.opts.pinnedImages})
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
