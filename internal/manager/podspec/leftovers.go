package podspec

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

const volCRIORunRoot = podpaths.VolumeCRIORunRoot

// leftoverArgs pass the policy on what removals left on the runtime: the
// remover looks for it on every run, and deletes only the kinds named.
func leftoverArgs(l config.Leftovers) []string {
	var args []string
	if len(l.Reclaim) > 0 {
		args = append(args, "--reclaim="+strings.Join(l.Reclaim, ","))
	}
	if len(l.Namespaces) > 0 {
		args = append(args, "--reclaim-namespaces="+strings.Join(l.Namespaces, ","))
	}
	if l.LeaseAge > 0 {
		args = append(args, "--lease-age="+l.LeaseAge.String())
	}
	if l.RecordAge > 0 {
		args = append(args, "--record-age="+l.RecordAge.String())
	}
	return args
}

// grantCRIOReclaim gives the remover what reclaiming CRI-O's leftovers
// takes, when the policy names one of their kinds on Linux CRI-O nodes:
// CRI-O's store writable (the remover's mount alone; the collector's stays
// read-only), its run root, where the store records what is mounted,
// podpaths.CRIOHostFiles read-only, and podpaths.CRIOReclaimCapabilities. Otherwise the remover reads the store only.
func grantCRIOReclaim(p Params, pod *corev1.Pod, remover *corev1.Container) {
	l := p.Config.Manager.Leftovers
	if p.OS != podpaths.Linux || p.Config.Manager.Runtime.Name != config.RuntimeCrio || !l.ReclaimsOnCRIO() {
		return
	}
	for i := range remover.VolumeMounts {
		if remover.VolumeMounts[i].Name == volImageFs {
			remover.VolumeMounts[i].ReadOnly = false
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volCRIORunRoot, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: l.RunRoot(), Type: ptr.To(corev1.HostPathDirectory)},
	}})
	remover.VolumeMounts = append(remover.VolumeMounts, corev1.VolumeMount{Name: volCRIORunRoot, MountPath: l.RunRoot()})
	remover.Args = append(remover.Args, "--crio-run-root="+l.RunRoot())
	for _, d := range podpaths.CRIOHostFiles {
		kind := corev1.HostPathDirectory
		if d.Created {
			kind = corev1.HostPathDirectoryOrCreate
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: d.Volume, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: d.Path, Type: ptr.To(kind)},
		}})
		remover.VolumeMounts = append(remover.VolumeMounts, corev1.VolumeMount{Name: d.Volume, MountPath: path.Join(podpaths.CRIOHostRoot, d.Path), ReadOnly: true})
	}
	remover.Args = append(remover.Args, "--crio-host-root="+podpaths.CRIOHostRoot)
	if sc := remover.SecurityContext; sc != nil && sc.Capabilities != nil {
		for _, c := range podpaths.CRIOReclaimCapabilities {
			sc.Capabilities.Add = append(sc.Capabilities.Add, corev1.Capability(c))
		}
	}
}
