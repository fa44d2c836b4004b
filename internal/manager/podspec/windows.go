package podspec

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// WindowsMemoryFloor is the least memory limit a Windows HostProcess
// container starts with; below it the container dies at start.
var WindowsMemoryFloor = resource.MustParse("256Mi")

// windowsPod makes the pod a HostProcess pod: it runs on the host as SYSTEM,
// reaches the runtime's named pipe directly (no socket mount), and must use
// the host network.
func windowsPod(pod *corev1.Pod) {
	pod.Spec.HostNetwork = true
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
		HostProcess:   ptr.To(true),
		RunAsUserName: ptr.To(WindowsUser),
	}}
}

// WindowsUser is the account HostProcess workers run as.
const WindowsUser = `NT AUTHORITY\SYSTEM`

// windowsContainer applies the explicit Windows executable contract: the
// component's Windows image, and its configured command or else the image's
// own entrypoint, never a name derived from the container's. The Linux-only
// security fields are invalid on Windows and go.
func windowsContainer(c *corev1.Container, comp config.Component, cfg *config.Config) {
	c.Image = comp.WindowsImage().Ref()
	c.Command = comp.Windows.Command
	c.SecurityContext = nil
	c.Env = append(c.Env, corev1.EnvVar{Name: "ERASER_RUNTIME_ENDPOINT", Value: cfg.Manager.Runtime.WindowsAddress})
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Cmp(WindowsMemoryFloor) < 0 {
		c.Resources.Limits[corev1.ResourceMemory] = WindowsMemoryFloor.DeepCopy()
	}
	if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok && q.Cmp(c.Resources.Limits[corev1.ResourceMemory]) > 0 {
		c.Resources.Requests[corev1.ResourceMemory] = c.Resources.Limits[corev1.ResourceMemory].DeepCopy()
	}
}
