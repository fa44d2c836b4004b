package podspec

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// retentionParts are what the retention policy adds to the collector and
// remover: both get the args and mounts, the remover alone removerMounts.
type retentionParts struct {
	args    []string
	volumes []corev1.Volume
	mounts  []corev1.VolumeMount
	// removerMounts are the image filesystem's: the remover measures it and
	// reads CRI-O's store for image ages; the collector leaves ages to the
	// remover and measures nothing.
	removerMounts []corev1.VolumeMount
}

// retention passes the policy as the workers' flags. minAge and the
// cool-down protect every job's candidates; unusedFor, keepVersions and the
// thresholds choose images on their own,
// which only scheduled runs do: an ImageList's job removes what it lists.
// Linux pods mount the node's state directory (writable: the workers keep
// the node's history there) and, into the remover, only when the
// thresholds or CRI-O's image ages need it, the image filesystem,
// read-only. Windows HostProcess pods see the host's
// filesystem and read the path the runtime names.
func retention(p Params) retentionParts {
	r := p.Config.Manager.Retention
	var out retentionParts
	out.args = append(out.args, "--min-age="+r.MinAge.String())
	scheduled := p.Kind == KindCollector
	if scheduled && r.UnusedFor > 0 {
		out.args = append(out.args, "--unused-for="+r.UnusedFor.String())
	}
	if scheduled && r.KeepVersions > 0 {
		out.args = append(out.args, "--keep-versions="+strconv.Itoa(r.KeepVersions))
	}
	// The cool-down holds back every automatic policy, "*" too: every job
	// gets it (an ImageList's named images ignore it in the remover), as a
	// flag when it is not the workers' default.
	if r.CoolDown != workerdefaults.CoolDown {
		out.args = append(out.args, "--cool-down="+r.CoolDown.String())
	}
	diskPressure := scheduled && r.DiskPressure()
	if diskPressure {
		out.args = append(out.args, "--high-threshold-percent="+strconv.Itoa(r.HighThresholdPercent),
			"--low-threshold-percent="+strconv.Itoa(r.LowThresholdPercent))
	}
	if p.OS != podpaths.Linux {
		return out
	}
	state := podpaths.StateDir(p.OS)
	out.volumes = append(out.volumes, corev1.Volume{Name: volState, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: state, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
	}})
	out.mounts = append(out.mounts, corev1.VolumeMount{Name: volState, MountPath: state})
	if diskPressure {
		out.args = append(out.args, "--imagefs-path="+r.ImageFsPath)
	}
	// CRI-O's CRI tells no pull times; its image store (containers/storage,
	// at imageFsPath) records them, so the first run on a CRI-O node sees an
	// image pulled a month ago as a month old (internal/node/criorecords).
	crio := p.Config.Manager.Runtime.Name == config.RuntimeCrio
	if crio {
		out.args = append(out.args, "--image-store="+r.ImageFsPath)
	}
	if diskPressure || crio {
		// Directory, not DirectoryOrCreate: a directory made up on the root
		// filesystem would be measured in place of the image filesystem.
		out.volumes = append(out.volumes, corev1.Volume{Name: volImageFs, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: r.ImageFsPath, Type: ptr.To(corev1.HostPathDirectory)},
		}})
		out.removerMounts = append(out.removerMounts, corev1.VolumeMount{Name: volImageFs, MountPath: r.ImageFsPath, ReadOnly: true})
	}
	return out
}
