// Package jobdata is what an ImageJob runs with, kept in immutable
// ConfigMaps beside it: the image list, the configuration in force when the
// job was created, the exclusion lists there were, and the nodes it runs on.
// Snapshotting these makes a running job immune to later edits and lets a
// restarted manager carry on exactly where it was.
package jobdata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// Keys of the job ConfigMap, beside config.ConfigKey, which holds the
// EraserConfig document as in the manager's own ConfigMap.
const (
	keyKind         = "kind"
	keyDryRun       = "dryRun"
	keyExclusions   = "exclusions"
	keyRemoverImage = "removerImage"
	// keyOnly confines a job to some nodes (Data.Nodes), a JSON list;
	// keyOnlyZ holds the list compressed, in binaryData, when it is long.
	keyOnly    = "onlyNodes"
	keyOnlyZ   = "onlyNodes.gz"
	keyNodes   = "nodes"
	keySkipped = "skipped"
)

// LabelExclusionList marks exclusion-list ConfigMaps, as upstream.
const LabelExclusionList = "eraser.sh/exclude.list"

// MaxSize keeps a job ConfigMap under the 1 MiB object limit with room for
// metadata.
const MaxSize = 1000 * 1024

// ErrInvalid marks job data that cannot be used: retrying will not help.
var ErrInvalid = errors.New("invalid job data")

// ErrTooLarge marks job data that cannot fit in a ConfigMap: only a smaller
// ImageList (or configuration) can run.
var ErrTooLarge = errors.New("job data too large")

// Data is what a job runs with.
type Data struct {
	Kind   podspec.Kind
	DryRun bool
	// Images are the ImageList's entries (manual jobs).
	Images []string
	// Config is parsed from Raw, with RemoverImage applied.
	Config       *config.Config
	Raw          []byte
	RemoverImage string
	// Exclusions name the exclusion-list ConfigMaps there were when the job
	// was created: a record. Pods mount the lists there are when each is
	// created, so a list added during the job is never left out.
	Exclusions []string
	// Nodes, when not nil, confine the job to these nodes (a scheduled
	// run's catch-up of the nodes it missed); the node filter still applies.
	Nodes []string
}

// NodesName is the name of the ConfigMap listing a job's nodes.
func NodesName(job string) string { return job + "-nodes" }

func owned(job *eraserv1.ImageJob, namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: namespace, Name: name,
		Labels: map[string]string{podspec.LabelJob: job.Name},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob", Name: job.Name, UID: job.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// Create stores a new job's data. A list too large for a ConfigMap is an
// error that names the limit. Data of this job there already is kept
// (immutable, it was written from the same run); a ConfigMap of the name
// that another job owns is ErrConflict.
func Create(ctx context.Context, c client.Client, namespace string, job *eraserv1.ImageJob, d Data) error {
	cm, err := configMap(job, namespace, d)
	if err != nil {
		return err
	}
	return createOwned(ctx, c, cm, job)
}

// createOwned creates cm, one of job's ConfigMaps, and tells an existing
// one of the job's apart from another's.
func createOwned(ctx context.Context, c client.Client, cm *corev1.ConfigMap, job *eraserv1.ImageJob) error {
	err := c.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), existing); err != nil {
		return fmt.Errorf("reading ConfigMap %s, which exists: %w", cm.Name, err)
	}
	if !SameRun(existing, job.UID) {
		return conflict("ConfigMap", existing, job.UID)
	}
	return nil
}

// Check says whether the data fits in a job ConfigMap, before any job is
// created for it; the error wraps ErrTooLarge.
func Check(d Data) error {
	_, err := configMap(&eraserv1.ImageJob{}, "", d)
	return err
}

func configMap(job *eraserv1.ImageJob, namespace string, d Data) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{ObjectMeta: owned(job, namespace, job.Name), Immutable: ptr.To(true), Data: map[string]string{
		keyKind:          string(d.Kind),
		config.ConfigKey: string(d.Raw),
	}}
	if d.DryRun {
		cm.Data[keyDryRun] = "true"
	}
	if d.RemoverImage != "" {
		cm.Data[keyRemoverImage] = d.RemoverImage
	}
	if d.Kind == podspec.KindManual {
		images, err := json.Marshal(d.Images)
		if err != nil {
			return nil, err
		}
		cm.Data[podpaths.ImageListKey] = string(images)
	}
	excl, err := json.Marshal(d.Exclusions)
	if err != nil {
		return nil, err
	}
	cm.Data[keyExclusions] = string(excl)
	size := 0
	for _, v := range cm.Data {
		size += len(v)
	}
	if d.Nodes != nil {
		nodes, err := json.Marshal(d.Nodes)
		if err != nil {
			return nil, err
		}
		if size+len(nodes) <= MaxSize {
			cm.Data[keyOnly] = string(nodes)
			size += len(nodes)
		} else {
			// A catch-up of many nodes with long names: compressed.
			z, err := Gzip(nodes)
			if err != nil {
				return nil, err
			}
			cm.BinaryData = map[string][]byte{keyOnlyZ: z}
			size += len(z)
		}
	}
	if size > MaxSize {
		return nil, fmt.Errorf("%w: the image list, configuration and nodes take %d bytes, more than the %d a ConfigMap can hold", ErrTooLarge, size, MaxSize)
	}
	return cm, nil
}

// CreateJob creates a job, then its data with the exclusion lists in the
// namespace now. If the job exists already (a retry after a crash between
// the two steps), its data is created if missing. It reports whether this
// call created the job.
func CreateJob(ctx context.Context, c client.Client, namespace string, job *eraserv1.ImageJob, d Data) (bool, error) {
	exclusions, err := ExclusionLists(ctx, c, namespace)
	if err != nil {
		return false, err
	}
	d.Exclusions = exclusions
	// Refused before the job exists: a job without its data would only fail
	// later, and for a reason that hides this one.
	if err := Check(d); err != nil {
		return false, err
	}
	// Data of the job's name before the job exists is a leftover of an
	// earlier job of that name: refused before a job is created that could
	// not get its data.
	leftover := &corev1.ConfigMap{}
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: job.Name}, leftover)
	if err == nil && !jobExists(ctx, c, job) {
		return false, conflict("ConfigMap", leftover, "")
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading ConfigMap %s: %w", job.Name, err)
	}
	created := true
	if err := c.Create(ctx, job); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating ImageJob %s: %w", job.Name, err)
		}
		created = false
		existing := &eraserv1.ImageJob{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), existing); err != nil {
			return false, err
		}
		// Adopted only when it is this run's: the same owner (the same
		// ImageList, not one deleted and created again by that name).
		if !SameRun(existing, RunOf(job)) {
			return false, conflict("ImageJob", existing, RunOf(job))
		}
		*job = *existing
	}
	if err := Create(ctx, c, namespace, job, d); err != nil {
		return created, fmt.Errorf("storing the data of ImageJob %s: %w", job.Name, err)
	}
	return created, nil
}

// Get reads a job's data; a ConfigMap of the job's name that another job
// owns is ErrConflict.
func Get(ctx context.Context, c client.Reader, namespace string, j *eraserv1.ImageJob) (*Data, error) {
	cm, err := getOwned(ctx, c, namespace, j.Name, j)
	if err != nil {
		return nil, err
	}
	job := j.Name
	d := &Data{Kind: podspec.Kind(cm.Data[keyKind]), DryRun: cm.Data[keyDryRun] == "true", Raw: []byte(cm.Data[config.ConfigKey]), RemoverImage: cm.Data[keyRemoverImage]}
	if d.Kind != podspec.KindManual && d.Kind != podspec.KindCollector {
		return nil, fmt.Errorf("%w: job ConfigMap %s: unknown kind %q", ErrInvalid, job, d.Kind)
	}
	cfg, _, err := config.Parse(d.Raw)
	if err != nil {
		return nil, fmt.Errorf("%w: job ConfigMap %s: %w", ErrInvalid, job, err)
	}
	if err := eraserconfig.ApplyRemoverImage(cfg, d.RemoverImage); err != nil {
		return nil, fmt.Errorf("%w: job ConfigMap %s: %w", ErrInvalid, job, err)
	}
	d.Config = cfg
	if d.Kind == podspec.KindManual {
		if err := json.Unmarshal([]byte(cm.Data[podpaths.ImageListKey]), &d.Images); err != nil {
			return nil, fmt.Errorf("%w: job ConfigMap %s: image list: %w", ErrInvalid, job, err)
		}
	}
	if s := cm.Data[keyExclusions]; s != "" {
		if err := json.Unmarshal([]byte(s), &d.Exclusions); err != nil {
			return nil, fmt.Errorf("%w: job ConfigMap %s: exclusions: %w", ErrInvalid, job, err)
		}
	}
	s, ok := cm.Data[keyOnly]
	if z, compressed := cm.BinaryData[keyOnlyZ]; compressed {
		raw, err := Gunzip(z, readNodesMax)
		if err != nil {
			return nil, fmt.Errorf("%w: job ConfigMap %s: %s: %w", ErrInvalid, job, keyOnlyZ, err)
		}
		s, ok = string(raw), true
	}
	if ok {
		if err := json.Unmarshal([]byte(s), &d.Nodes); err != nil || d.Nodes == nil {
			return nil, fmt.Errorf("%w: job ConfigMap %s: nodes: want a JSON list of node names, got %.40q", ErrInvalid, job, s)
		}
	}
	return d, nil
}

// ExclusionLists names the exclusion-list ConfigMaps in the namespace.
func ExclusionLists(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{LabelExclusionList: "true"}); err != nil {
		return nil, err
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	return names, nil
}

// Nodes are a job's nodes, fixed when it starts.
type Nodes struct {
	Targets []nodefilter.Target
	Skipped []nodefilter.Skipped
}
