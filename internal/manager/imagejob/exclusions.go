package imagejob

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/wire/exclusionlist"
)

// maxNotesPerEvent bounds one Event's message; the rest are counted.
const maxNotesPerEvent = 10

// warnExclusions reads the exclusion lists as the workers will, files a
// Warning Event on each ConfigMap that holds something read differently
// from upstream (once per job and version of the ConfigMap) and sets
// eraser_exclusion_entries_legacy. It never fails the run: the workers
// read the lists themselves.
func (r *Reconciler) warnExclusions(ctx context.Context, job *eraserv1.ImageJob, st *jobState) {
	var list corev1.ConfigMapList
	if err := r.client.List(ctx, &list, client.InNamespace(r.opts.Namespace), client.MatchingLabels{jobdata.LabelExclusionList: "true"}); err != nil {
		return
	}
	counts := map[string]int{}
	for i := range list.Items {
		cm := &list.Items[i]
		notes, err := ExclusionNotes(cm)
		counts[cm.Name] = len(notes)
		seen := cm.Name + "@" + cm.ResourceVersion
		if st.exclusionsWarned[seen] {
			continue
		}
		if st.exclusionsWarned == nil {
			st.exclusionsWarned = map[string]bool{}
		}
		st.exclusionsWarned[seen] = true
		if err != nil {
			r.recorder.Eventf(cm, corev1.EventTypeWarning, eraserv1.ReasonUnreadableExclusionList,
				"job %s: every node's worker fails on this list and removes nothing: %v", job.Name, err)
			continue
		}
		if len(notes) > 0 {
			r.recorder.Event(cm, corev1.EventTypeWarning, eraserv1.ReasonLegacyExclusion, NotesMessage(notes))
		}
	}
	metrics.SetExclusionsLegacy(counts)
}

// ExclusionNotes reads one exclusion-list ConfigMap as the workers do and
// returns what is read differently from upstream Eraser.
func ExclusionNotes(cm *corev1.ConfigMap) ([]exclusionlist.Note, error) {
	list, err := exclusionlist.ReadConfigMap(cm.Data, cm.BinaryData)
	return list.Notes, err
}

// NotesMessage says what is read differently, the first few notes in full.
func NotesMessage(notes []exclusionlist.Note) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d entr%s read differently from upstream Eraser (still protecting at least what upstream did; rewrite them in the documented forms): ",
		len(notes), map[bool]string{true: "y", false: "ies"}[len(notes) == 1])
	shown := notes[:min(len(notes), maxNotesPerEvent)]
	parts := make([]string, 0, len(shown))
	for _, n := range shown {
		parts = append(parts, n.String())
	}
	b.WriteString(strings.Join(parts, "; "))
	if rest := len(notes) - len(shown); rest > 0 {
		fmt.Fprintf(&b, "; and %d more", rest)
	}
	return b.String()
}
