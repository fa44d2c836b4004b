package podspec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestBuildWindows: a HostProcess pod with the explicit executable contract,
// no Linux-only fields and no socket mount; Linux pods are unchanged.
func TestBuildWindows(t *testing.T) {
	c := cfg(t, `manager: {runtime: {name: containerd, windowsAddress: 'npipe://./pipe/custom'}}
components:
  collector: {enabled: true, image: {repo: c, tag: "1"}}
  remover:
    image: {repo: r, tag: "1"}
    windows: {image: {repo: r-win, tag: "1"}, command: ['%CONTAINER_SANDBOX_MOUNT_POINT%\\eraser\\remover.exe']}`)
	cases := map[string]struct {
		kind       Kind
		wantImages []string
		wantCmd    [][]string
		wantArgs   string
	}{
		"manual": {kind: KindManual, wantImages: []string{"r-win:1"}, wantCmd: [][]string{{`%CONTAINER_SANDBOX_MOUNT_POINT%\\eraser\\remover.exe`}},
			wantArgs: `--imagelist=C:\run\eraser.sh\imagelist\images --log-level=info --exclusion-dir=C:\run\eraser.sh\exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s --keep-not-repullable=true --remove-vulnerable-referenced=true --references-dir=C:\run\eraser.sh\references --registry-check=true --run=j`},
		"scheduled": {kind: KindCollector, wantImages: []string{"c:1", "r-win:1"}, wantCmd: [][]string{nil, {`%CONTAINER_SANDBOX_MOUNT_POINT%\\eraser\\remover.exe`}},
			wantArgs: `--scan-disabled=true --handoff-timeout=1h0m0s --log-level=info --exclusion-dir=C:\run\eraser.sh\exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, err := Build(Params{References: testRefs, Job: "j", Kind: tc.kind, Node: "win-1", OS: podpaths.Windows, ConfigMap: "j", LogLevel: "info", Config: c, Exclusions: []string{"keep"}})
			if err != nil {
				t.Fatal(err)
			}
			s := pod.Spec
			if !s.HostNetwork || s.OS.Name != corev1.Windows || s.SecurityContext == nil || !*s.SecurityContext.WindowsOptions.HostProcess ||
				*s.SecurityContext.WindowsOptions.RunAsUserName != WindowsUser {
				t.Errorf("not a HostProcess pod: %+v", s)
			}
			var images []string
			var cmds [][]string
			for _, ctr := range s.Containers {
				images = append(images, ctr.Image)
				cmds = append(cmds, ctr.Command)
				if ctr.SecurityContext != nil {
					t.Errorf("%s keeps a Linux security context", ctr.Name)
				}
				if q := ctr.Resources.Limits[corev1.ResourceMemory]; q.Cmp(WindowsMemoryFloor) < 0 {
					t.Errorf("%s memory limit %s below the HostProcess floor", ctr.Name, q.String())
				}
				env := map[string]string{}
				for _, e := range ctr.Env {
					env[e.Name] = e.Value
				}
				if env["ERASER_RUNTIME_ENDPOINT"] != "npipe://./pipe/custom" {
					t.Errorf("%s endpoint %q", ctr.Name, env["ERASER_RUNTIME_ENDPOINT"])
				}
				for _, m := range ctr.VolumeMounts {
					if m.Name == volRuntime || strings.HasPrefix(m.MountPath, "/") {
						t.Errorf("%s has a Linux mount %s at %s", ctr.Name, m.Name, m.MountPath)
					}
				}
			}
			for _, v := range s.Volumes {
				if v.HostPath != nil {
					t.Errorf("a hostPath volume %s on a Windows pod", v.Name)
				}
			}
			if diff := cmp.Diff(tc.wantImages, images); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCmd, cmds); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
			if got := strings.Join(s.Containers[0].Args, " "); got != tc.wantArgs {
				t.Errorf("args %q\nwant %q", got, tc.wantArgs)
			}
		})
	}
	// The same config on a Linux node: the Linux image, its entrypoint.
	linux, err := Build(Params{References: testRefs, Job: "j", Kind: KindManual, Node: "l", OS: podpaths.Linux, ConfigMap: "j", Config: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := linux.Spec.Containers[0]; got.Image != "r:1" || got.Command != nil || linux.Spec.HostNetwork {
		t.Errorf("Linux pod changed: image %s command %v hostNetwork %v", got.Image, got.Command, linux.Spec.HostNetwork)
	}
}
