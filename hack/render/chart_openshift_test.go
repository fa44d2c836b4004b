package render

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// scc is the part of OpenShift's SecurityContextConstraints that the
// chart's SCC sets and that admission judges a pod by.
type scc struct {
	AllowHostDirVolumePlugin bool     `json:"allowHostDirVolumePlugin"`
	AllowHostIPC             bool     `json:"allowHostIPC"`
	AllowHostNetwork         bool     `json:"allowHostNetwork"`
	AllowHostPID             bool     `json:"allowHostPID"`
	AllowHostPorts           bool     `json:"allowHostPorts"`
	AllowPrivilegeEscalation *bool    `json:"allowPrivilegeEscalation"`
	AllowPrivilegedContainer bool     `json:"allowPrivilegedContainer"`
	ReadOnlyRootFilesystem   bool     `json:"readOnlyRootFilesystem"`
	RequiredDropCapabilities []string `json:"requiredDropCapabilities"`
	AllowedCapabilities      []string `json:"allowedCapabilities"`
	DefaultAddCapabilities   []string `json:"defaultAddCapabilities"`
	RunAsUser                struct {
		Type string `json:"type"`
	} `json:"runAsUser"`
	SELinuxContext struct {
		Type           string                 `json:"type"`
		SELinuxOptions *corev1.SELinuxOptions `json:"seLinuxOptions"`
	} `json:"seLinuxContext"`
	SeccompProfiles []string `json:"seccompProfiles"`
	Volumes         []string `json:"volumes"`
}

// sccRefusals are the reasons SCC admission gives for refusing pod under
// s, as OpenShift's strategies judge the fields the chart's SCC sets (a
// field left unset in the pod is one the SCC defaults, so admitted).
func sccRefusals(s scc, pod *corev1.Pod) []string {
	var out []string
	spec := pod.Spec
	if spec.HostNetwork && !s.AllowHostNetwork || spec.HostPID && !s.AllowHostPID || spec.HostIPC && !s.AllowHostIPC {
		out = append(out, "host namespaces")
	}
	if s.RunAsUser.Type != "RunAsAny" {
		out = append(out, "runAsUser "+s.RunAsUser.Type+" is not judged here")
	}
	volumeType := func(v corev1.Volume) string {
		switch {
		case v.HostPath != nil:
			return "hostPath"
		case v.ConfigMap != nil:
			return "configMap"
		case v.Secret != nil:
			return "secret"
		case v.EmptyDir != nil:
			return "emptyDir"
		case v.Projected != nil:
			return "projected"
		case v.DownwardAPI != nil:
			return "downwardAPI"
		}
		return "other"
	}
	for _, v := range spec.Volumes {
		typ := volumeType(v)
		if !slices.Contains(s.Volumes, typ) && !slices.Contains(s.Volumes, "*") || typ == "hostPath" && !s.AllowHostDirVolumePlugin {
			out = append(out, fmt.Sprintf("volume %s: %s", v.Name, typ))
		}
	}
	seLinux := func(where string, o *corev1.SELinuxOptions) {
		if o != nil && s.SELinuxContext.Type == "MustRunAs" && s.SELinuxContext.SELinuxOptions != nil && o.Type != "" && o.Type != s.SELinuxContext.SELinuxOptions.Type {
			out = append(out, fmt.Sprintf("%s: SELinux type %s", where, o.Type))
		}
	}
	seccomp := func(where string, p *corev1.SeccompProfile) {
		if p != nil && p.Type == corev1.SeccompProfileTypeRuntimeDefault && !slices.Contains(s.SeccompProfiles, "runtime/default") ||
			p != nil && p.Type != corev1.SeccompProfileTypeRuntimeDefault && !slices.Contains(s.SeccompProfiles, "*") {
			out = append(out, fmt.Sprintf("%s: seccomp %s", where, p.Type))
		}
	}
	if psc := spec.SecurityContext; psc != nil {
		seLinux("pod", psc.SELinuxOptions)
		seccomp("pod", psc.SeccompProfile)
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, p := range c.Ports {
			if p.HostPort != 0 && !s.AllowHostPorts {
				out = append(out, fmt.Sprintf("container %s: host port %d", c.Name, p.HostPort))
			}
		}
		sc := c.SecurityContext
		if sc == nil {
			if len(s.RequiredDropCapabilities) > 0 {
				out = append(out, fmt.Sprintf("container %s: drops no capability", c.Name))
			}
			continue
		}
		if sc.Privileged != nil && *sc.Privileged && !s.AllowPrivilegedContainer {
			out = append(out, fmt.Sprintf("container %s: privileged", c.Name))
		}
		if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation && s.AllowPrivilegeEscalation != nil && !*s.AllowPrivilegeEscalation {
			out = append(out, fmt.Sprintf("container %s: privilege escalation", c.Name))
		}
		if s.ReadOnlyRootFilesystem && sc.ReadOnlyRootFilesystem != nil && !*sc.ReadOnlyRootFilesystem {
			out = append(out, fmt.Sprintf("container %s: writable root filesystem", c.Name))
		}
		seLinux("container "+c.Name, sc.SELinuxOptions)
		seccomp("container "+c.Name, sc.SeccompProfile)
		var add, drop []corev1.Capability
		if sc.Capabilities != nil {
			add, drop = sc.Capabilities.Add, sc.Capabilities.Drop
		}
		for _, a := range add {
			if !slices.Contains(s.AllowedCapabilities, string(a)) && !slices.Contains(s.DefaultAddCapabilities, string(a)) && !slices.Contains(s.AllowedCapabilities, "*") {
				out = append(out, fmt.Sprintf("container %s: capability %s may not be added", c.Name, a))
			}
		}
		for _, d := range s.RequiredDropCapabilities {
			if !slices.Contains(drop, corev1.Capability(d)) {
				out = append(out, fmt.Sprintf("container %s: %s is required to be dropped", c.Name, d))
			}
		}
	}
	return out
}

// Every worker pod the manager can create under an OpenShift values file
// (built by the manager's own podspec from the EraserConfig the chart
// renders) is admitted by the SCC the chart renders, with CRI-O's leftover
// reclaim on (its remover adds capabilities) and off.
func TestOpenShiftSCCAdmitsWorkerPods(t *testing.T) {
	files, err := filepath.Glob(repoPath("examples", "values", "openshift*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/values/openshift*.yaml: %v", err)
	}
	for _, f := range files {
		for name, set := range map[string][]string{
			"reclaim off":    nil,
			"CRI-O reclaim":  {"runtimeConfig.manager.leftovers.reclaim={orphan-container,unreferenced-layer,incomplete-layer}"},
			"one CRI-O kind": {"runtimeConfig.manager.leftovers.reclaim={incomplete-layer}"},
		} {
			t.Run(filepath.Base(f)+"/"+name, func(t *testing.T) {
				objs := render(t, Options{Namespace: "eraser-system", ValuesFiles: []string{f}, Set: set})
				u := find(objs, "SecurityContextConstraints", "eraser-workers")
				if u == nil {
					t.Fatal("no SecurityContextConstraints eraser-workers")
				}
				var rules scc
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rules); err != nil {
					t.Fatal(err)
				}
				cfg, _ := managerConfig(t, objs)
				if set != nil && !cfg.Manager.Leftovers.ReclaimsOnCRIO() {
					t.Fatalf("the rendered configuration reclaims no CRI-O kind: %v", cfg.Manager.Leftovers.Reclaim)
				}
				for _, kind := range []podspec.Kind{podspec.KindCollector, podspec.KindManual} {
					pod, err := podspec.Build(podspec.Params{Job: "job", Kind: kind, Node: "node", OS: podpaths.Linux, Namespace: "eraser-system",
						Config: cfg, ConfigMap: "job-config", ConfigKey: "config.yaml", References: []string{"job-references-0"}, NodeReferences: "0"})
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff([]string(nil), sccRefusals(rules, pod)); diff != "" {
						t.Errorf("%s pod refused by SCC eraser-workers (-want +refusals):\n%s", kind, diff)
					}
					if set != nil && !strings.Contains(fmt.Sprint(pod.Spec.Containers), "DAC_OVERRIDE") {
						t.Errorf("%s pod: no container adds DAC_OVERRIDE, the test does not exercise the reclaiming remover", kind)
					}
				}
			})
		}
	}
}
