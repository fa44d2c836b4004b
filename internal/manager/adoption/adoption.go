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
package adoption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// Decide says whether a list's current generation runs. since is the
// install's date; zero runs everything upstream did not already run.
func Decide(list *eraserv1.ImageList, since time.Time) Decision {
	st := &list.Status
	if st.ObservedGeneration != 0 || st.StartedGeneration != 0 || len(st.Conditions) > 0 {
		// This Eraser has handled the list before: its edits run.
		return Run
	}
	if st.Timestamp != nil {
		// Only upstream writes results without a generation.
		return UpstreamRan
	}
	if list.Name != UpstreamListName && list.CreationTimestamp.Time.Before(since) {
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
		return time.Time{}, fmt.Errorf("reading the install's record, ConfigMap %s: %w", RecordName, err)
	}
	return cm.CreationTimestamp.Time, nil
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
