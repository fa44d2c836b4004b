package podspec

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// registryCheck is what the registry check adds to the remover: its flags,
// and the credentials Secret mounted read-only. The Secret is optional: a
// missing one does not hold back a run's removals, and the remover says in
// its report that it asked anonymously. The kubelet mounts it; the workers
// still have no API access.
func registryCheck(p Params, pod *corev1.Pod) (args []string, mounts []corev1.VolumeMount) {
	rc := p.Config.Manager.Retention.RegistryCheck
	if rc.Disabled {
		return []string{"--registry-check=false"}, nil
	}
	args = []string{"--registry-check=true"}
	if rc.Lookback > 0 {
		args = append(args, "--registry-lookback="+rc.Lookback.String())
	}
	if rc.MaxRequests > 0 {
		args = append(args, "--registry-max-requests="+strconv.Itoa(rc.MaxRequests))
	}
	if rc.Timeout > 0 {
		args = append(args, "--registry-timeout="+rc.Timeout.String())
	}
	if rc.RemoveUnreachable {
		args = append(args, "--registry-when-unreachable=remove")
	}
	hosts := make([]string, 0, len(rc.Mirrors))
	for h := range rc.Mirrors {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		args = append(args, "--registry-mirror="+h+"="+strings.Join(rc.Mirrors[h], ","))
	}
	if len(rc.PlainHTTP) > 0 {
		args = append(args, "--registry-plain-http="+strings.Join(rc.PlainHTTP, ","))
	}
	if rc.CredentialsSecret == "" {
		return args, nil
	}
	dir := podpaths.RegistryCredentialsDir(p.OS)
	args = append(args, "--registry-credentials="+podpaths.Join(p.OS, dir, podpaths.RegistryCredentialsFile))
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: podpaths.VolumeRegistryCredentials, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{
			SecretName: rc.CredentialsSecret,
			Items:      []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: podpaths.RegistryCredentialsFile}},
			Optional:   ptr.To(true),
		},
	}})
	mounts = []corev1.VolumeMount{{Name: podpaths.VolumeRegistryCredentials, MountPath: dir, ReadOnly: true}}
	return args, mounts
}
