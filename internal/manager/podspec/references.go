package podspec

import (
	"errors"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// protection is what the cluster-aware protections add to the remover: its
// flags, always spelled out (the binary's defaults protect, the
// configuration may not), and, unless the configuration turns it off, the
// cluster's references: the node's set from the pod's own annotation
// through a downward API file, the cluster set's parts from the wave's
// ConfigMaps. Neither needs API access; both are fixed when the pod is
// created, which is when its wave starts.
func protection(p Params, pod *corev1.Pod) (args []string, mounts []corev1.VolumeMount, err error) {
	r := p.Config.Manager.Retention
	args = []string{
		"--keep-not-repullable=" + strconv.FormatBool(!r.RemoveNotRepullable),
		"--remove-vulnerable-referenced=" + strconv.FormatBool(!r.KeepVulnerableReferenced),
	}
	args = append(args, leftoverArgs(p.Config.Manager.Leftovers)...)
	if r.IgnoreReferenced {
		return args, nil, nil
	}
	if len(p.References) == 0 {
		// Never a pod that would judge without the cluster's references.
		return nil, nil, errors.New("the configuration protects referenced images and the job's wave has no references")
	}
	dir := podpaths.ReferencesDir(p.OS)
	args = append(args, "--references-dir="+dir)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[references.AnnotationNode] = p.NodeReferences
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: podpaths.VolumeNodeRefs, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: references.NodeFile, FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.annotations['" + references.AnnotationNode + "']",
			}}},
		}}},
		corev1.Volume{Name: podpaths.VolumeClusterRefs, VolumeSource: corev1.VolumeSource{Projected: clusterParts(p.References)}},
	)
	mounts = []corev1.VolumeMount{
		{Name: podpaths.VolumeNodeRefs, MountPath: podpaths.Join(p.OS, dir, references.NodeDir), ReadOnly: true},
		{Name: podpaths.VolumeClusterRefs, MountPath: podpaths.Join(p.OS, dir, references.ClusterDir), ReadOnly: true},
	}
	return args, mounts, nil
}

// clusterParts projects the cluster set's ConfigMaps, one file per part.
// Not optional: a pod whose parts are gone does not start, rather than run
// without them.
func clusterParts(names []string) *corev1.ProjectedVolumeSource {
	out := &corev1.ProjectedVolumeSource{}
	for k, name := range names {
		out.Sources = append(out.Sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items:                []corev1.KeyToPath{{Key: references.PartKey, Path: references.PartFile(k + 1)}},
		}})
	}
	return out
}

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
