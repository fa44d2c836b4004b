//go:build linux

package testcrio

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// config is crio.conf for this instance. Every path CRI-O would otherwise
// take from /etc, /var/lib or /var/run is set under Dir: two instances (or
// a host CRI-O) must never share state, and cleanup must find all of it.
func (c *CRIO) config() string {
	d := func(p string) string { return filepath.Join(c.Dir, p) }
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

[crio.network]
network_dir = %q
plugin_dirs = [%q]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`,
		d("root"), d("run"), d("pods"), d("run/version"), d("version"), d("clean.shutdown"),
		c.Socket,
		d("run/exits"), d("run/attach"), d("run/ns"), filepath.Join(c.bin, "pinns"), d("hooks.d"), d("cdi"),
		d("irqbalance"),
		runc, d("run/runc"), conmon,
		c.opts.pauseImage, d("policy.json"), d("policies"), quoteList(c.opts.pinnedImages),
		d("cni/conf"), d("cni/bin"))
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
