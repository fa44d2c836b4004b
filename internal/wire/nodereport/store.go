package nodereport

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/util/kname"
)

// LabelReport marks a report shard with its job's name (shortened like any
// label value; readers check the job key).
const LabelReport = eraserv1.LabelReport

// Keys of a shard ConfigMap.
const (
	// KeyData holds the gzip'd shard.
	KeyData = "report.json.gz"
	// KeyNodes lists the shard's nodes, one per line, in plain text.
	KeyNodes = "nodes"
	// KeyJob names the job, whole.
	KeyJob = "job"
)

// AnnotationBytes is a shard's size in bytes, as written, so that the bound
// on all reports together is kept from the shards' metadata alone.
const AnnotationBytes = "eraser.sh/report-bytes"

// Bytes is a shard's size from its metadata: what AnnotationBytes says, or
// for a shard written without it, the most a shard holds.
func Bytes(m metav1.Object) int64 {
	if n, err := strconv.ParseInt(m.GetAnnotations()[AnnotationBytes], 10, 64); err == nil && n >= 0 {
		return n
	}
	return ShardBudget
}

// Selector is the label selector of a job's shards.
func Selector(job string) string {
	return labels.SelectorFromSet(labels.Set{LabelReport: kname.LabelValue(job)}).String()
}

// ShardName is the name of a job's i-th shard.
func ShardName(job string, i int) string {
	suffix := "-report-" + strconv.Itoa(i)
	return kname.Shorten(job, 253-len(suffix)) + suffix
}

// ConfigMap is a job's i-th shard. It is owned by the job (not as its
// controller: shards are written by the report's collector and must not
// wake the job's own controller), so the garbage collector deletes it with
// the job if the manager does not.
func ConfigMap(job *eraserv1.ImageJob, namespace string, i int, s Shard) *corev1.ConfigMap {
	nodes := NodeList(s.Nodes)
	size := len(s.Data) + len(nodes) + len(job.Name)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: ShardName(job.Name, i),
			Labels:      map[string]string{LabelReport: kname.LabelValue(job.Name)},
			Annotations: map[string]string{AnnotationBytes: strconv.Itoa(size)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob", Name: job.Name, UID: job.UID,
				BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Data:       map[string]string{KeyNodes: nodes, KeyJob: job.Name},
		BinaryData: map[string][]byte{KeyData: s.Data},
	}
}

// Ours says whether cm is a shard of this run of job: it names the job and
// is owned by the job's UID (an owner reference, not a controller one, so
// jobdata.SameRun does not apply). A shard of an earlier job of the same
// name, not yet deleted by the garbage collector, is not.
func Ours(cm *corev1.ConfigMap, job *eraserv1.ImageJob) bool {
	if cm.Data[KeyJob] != job.Name {
		return false
	}
	for _, ref := range cm.OwnerReferences {
		if ref.UID == job.UID {
			return true
		}
	}
	return false
}

// ShardIndex is the index in a shard's name (ShardName).
func ShardIndex(name string) int {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '-' {
			n, _ := strconv.Atoi(name[i+1:])
			return n
		}
	}
	return 0
}

// Read decodes a job's shards; only nodes matching keep (all when nil) are
// decoded, so that reading one node's part reads one shard.
func Read(shards []corev1.ConfigMap, keep func(node string) bool) ([]Node, error) {
	var out []Node
	for _, cm := range shards {
		if keep != nil && !slices.ContainsFunc(ParseNodeList(cm.Data[KeyNodes]), keep) {
			continue
		}
		nodes, err := Decode(cm.BinaryData[KeyData])
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		for _, n := range nodes {
			if keep == nil || keep(n.Name) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}
