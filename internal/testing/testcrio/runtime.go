//go:build linux

// How a test's pods run on CRI-O; testcri.CRI runs them.

package testcrio

import (
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pod is a pod as the tests run it on CRI-O: host network, and a PID
// namespace per container, as the kubelet asks for a pod without
// shareProcessNamespace: CRI-O then runs no infra (pause) container, whose
// oom_score_adj of -998 runc cannot set without CAP_SYS_RESOURCE, which
// some machines (this project's CI) lack. The containers must say the same,
// as the kubelet's do.
func (c *CRIO) pod(name string) (*runtimeapi.PodSandboxConfig, *runtimeapi.LinuxContainerConfig) {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}
	return &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
			LogDirectory: filepath.Join(c.Dir, "pods", name),
			Linux: &runtimeapi.LinuxPodSandboxConfig{
				// The kubelet passes the pod's QoS cgroup here; without one,
				// CRI-O's cgroupfs manager puts pods in /crio, shared by all.
				CgroupParent:    c.cgroup + "/pod-" + name,
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns},
			},
		}, &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns},
		}
}
