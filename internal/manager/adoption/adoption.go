// Package adoption decides which ImageLists run when Eraser is installed in
// a cluster that already has some, as after upstream Eraser. Upstream ran
// only the list named "imagelist" and ignored every other name; its status
// has results but no generation. A list that was there before the install
// runs only if upstream would have run it: a list upstream never got to
// under its one name. A list upstream already ran, or ignored by name, is
// taken over as it is and runs on its next edit or run-now request. Lists
// created after the install run as usual.
//
// The install is dated by its record, a ConfigMap the chart and the static
// manifest create (and the manager, when an install lacks it): the API
// server's own creation time, comparable with the lists', whatever the
// manager's clock says.
//
// Dating alone cannot tell a list that was there before from one applied in
// the same moment as a first install, as one GitOps sync applies both. So
// the manager, at its first start with the record, also records whether an
// earlier Eraser had been there (Evidence): only then are lists judged by
// date. A first install into a cluster where no Eraser ever ran has no lists
// upstream ignored, and runs every list, those applied alongside it too.
package adoption

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// RecordName is the install's record in the manager's namespace.
const RecordName = "eraser-adoption"

// UpstreamListName is the one ImageList name upstream Eraser ran.
const UpstreamListName = "imagelist"

// Decision is what becomes of a list's current generation.
type Decision string

const (
	// Run: the generation runs as usual.
	Run Decision = ""
	// UpstreamRan: upstream ran the list; its results stand.
	UpstreamRan Decision = eraserv1.ReasonUpstreamRan
	// NotRun: the list was there before the install under a name upstream
	// ignored.
	NotRun Decision = eraserv1.ReasonNotRunOnAdoption
)

// Install is what the record says of the install.
type Install struct {
	// Since is when the record was created; zero when unknown.
	Since time.Time
	// Earlier says whether an earlier Eraser had been in the cluster when
	// the manager first read the record, or whether that is unknown: only
	// then are lists created before Since taken over without a run.
	Earlier bool
}

// Decide says whether a list's current generation runs. A zero install
// runs everything upstream did not already run.
func Decide(list *eraserv1.ImageList, inst Install) Decision {
	st := &list.Status
	if st.ObservedGeneration != 0 || st.StartedGeneration != 0 || len(st.Conditions) > 0 {
		// This Eraser has handled the list before: its edits run.
		return Run
	}
	if st.Timestamp != nil {
		// Only upstream writes results without a generation.
		return UpstreamRan
	}
	if inst.Earlier && list.Name != UpstreamListName && list.CreationTimestamp.Time.Before(inst.Since) {
		return NotRun
	}
	return Run
}

// Message is the Ready condition's message for a list that does not run.
func Message(v Decision, list *eraserv1.ImageList, since time.Time) string {
	again := fmt.Sprintf("it runs when its spec is edited or %s is set (kubectl eraser run imagelist/%s)", eraserv1.AnnotationRunNow, list.Name)
	switch v {
	case UpstreamRan:
		at := "at an unknown time"
		if ts := list.Status.Timestamp; ts != nil {
			at = ts.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("upstream Eraser already ran this list (finished %s); not run again on install: %s", at, again)
	case NotRun:
		return fmt.Sprintf("created before Eraser was installed (%s) under a name upstream Eraser ignored (it ran only %q): not run on install; %s",
			since.UTC().Format(time.RFC3339), UpstreamListName, again)
	}
	return ""
}

// Since returns the install's date: when its record was created. An install
// without one (a manifest of one's own) gets one now.
func Since(ctx context.Context, c client.Client, namespace string) (time.Time, error) {
	inst, err := Read(ctx, c, namespace)
	return inst.Since, err
}

// Read returns what the install's record says, creating the record where
// an install lacks one. A record the manager has not surveyed (Survey) says
// an earlier Eraser may have been there: lists are judged by date.
func Read(ctx context.Context, c client.Client, namespace string) (Install, error) {
	cm, err := record(ctx, c, namespace)
	if err != nil {
		return Install{}, err
	}
	return installOf(cm), nil
}

func installOf(cm *corev1.ConfigMap) Install {
	return Install{Since: cm.CreationTimestamp.Time, Earlier: cm.Data[KeyEarlier] != NoEarlier}
}

func record(ctx context.Context, c client.Client, namespace string) (*corev1.ConfigMap, error) {
	key := client.ObjectKey{Namespace: namespace, Name: RecordName}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		cm = NewRecord(namespace)
		err = c.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, key, cm)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the install's record, ConfigMap %s: %w", RecordName, err)
	}
	return cm, nil
}

// KeyEarlier is the record's key for what the manager found of an earlier
// Eraser when it first read the record: the evidence, or NoEarlier. The
// chart and the manifest leave it out; a record without it is judged as
// one with evidence.
const KeyEarlier = "earlierEraser"

// NoEarlier is KeyEarlier's value where no earlier Eraser was found.
const NoEarlier = "none"

// crdLead is how much older than the record the ImageList CRD must be to
// show an earlier install: one install applies both within seconds (and
// Helm and Argo CD create ConfigMaps before CRDs); an earlier one's are
// older by as long as it ran.
const crdLead = time.Minute

// Evidence says what shows that an Eraser had been in the cluster before
// the record was created, or "" when nothing does: an ImageJob (only an
// Eraser creates one, and a first install's manager has created none when
// it surveys), an ImageList with a status (upstream's results, or an
// earlier install's), or the ImageList CRD created well before the record.
// crd is zero when the CRD could not be read.
func Evidence(recordCreated, crd time.Time, lists []eraserv1.ImageList, jobs []eraserv1.ImageJob) string {
	if len(jobs) > 0 {
		return fmt.Sprintf("ImageJob %s was there", jobs[0].Name)
	}
	for i := range lists {
		if l := &lists[i]; !reflect.ValueOf(l.Status).IsZero() {
			return fmt.Sprintf("ImageList %s had a status", l.Name)
		}
	}
	if !crd.IsZero() && crd.Add(crdLead).Before(recordCreated) {
		return fmt.Sprintf("the ImageList CRD was created at %s, before the record", crd.UTC().Format(time.RFC3339))
	}
	return ""
}

// Survey returns what the install's record says, as Read, and first, where
// the record does not say yet, whether an earlier Eraser had been there: it
// looks (Evidence) and writes the answer into the record. The manager calls
// it once at start, before it creates any ImageJob, with a client that
// reads the API server directly.
func Survey(ctx context.Context, c client.Client, namespace string) (Install, error) {
	for {
		cm, err := record(ctx, c, namespace)
		if err != nil {
			return Install{}, err
		}
		if _, ok := cm.Data[KeyEarlier]; ok {
			return installOf(cm), nil
		}
		var lists eraserv1.ImageListList
		if err := c.List(ctx, &lists); err != nil {
			return Install{}, fmt.Errorf("looking for an earlier Eraser's ImageLists: %w", err)
		}
		var jobs eraserv1.ImageJobList
		if err := c.List(ctx, &jobs, client.Limit(1)); err != nil {
			return Install{}, fmt.Errorf("looking for an earlier Eraser's ImageJobs: %w", err)
		}
		var crdCreated time.Time
		crd := &apiextensionsv1.CustomResourceDefinition{}
		switch err := c.Get(ctx, client.ObjectKey{Name: "imagelists." + eraserv1.GroupVersion.Group}, crd); {
		case err == nil:
			crdCreated = crd.CreationTimestamp.Time
		case !apierrors.IsNotFound(err):
			// Not guessed: a wrong "none" would run lists upstream
			// ignored.
			return Install{}, fmt.Errorf("reading the ImageList CRD's age: %w", err)
		}
		found := Evidence(cm.CreationTimestamp.Time, crdCreated, lists.Items, jobs.Items)
		if found == "" {
			found = NoEarlier
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[KeyEarlier] = found
		err = c.Update(ctx, cm)
		if apierrors.IsConflict(err) {
			// Another replica, or an edit: read it again.
			continue
		}
		if err != nil {
			return Install{}, fmt.Errorf("writing the install's record, ConfigMap %s: %w", RecordName, err)
		}
		return installOf(cm), nil
	}
}

// NewRecord is the record as the manager creates it; the chart's and the
// manifest's carry the same data.
func NewRecord(namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: RecordName},
		Data:       map[string]string{"about": About},
	}
}

// About is the record's explanation for whoever finds it.
const About = "Its creation time is when Eraser was installed: ImageLists created before it run only if upstream Eraser would have run them (docs/migrating.md). Deleting it dates the install anew."
