// The bound on the reports of all jobs together: each job's report is
// bounded by its shards, but frequent runs on a large cluster would keep
// many of them for keepReportFor, in etcd. Past manager.imageJob.cleanup.
// maxReportSize, the oldest finished jobs go with their reports first.

package imagejob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// keptReport is one job's report as the bound sees it.
type keptReport struct {
	Job   string
	Bytes int64
	// Finished is when the job ended; only a droppable report's counts.
	Finished time.Time
	// Droppable: the job has finished, its owner has recorded it, and its
	// report is complete. Any other report is counted and kept.
	Droppable bool
}

// reportsToDrop are the jobs whose reports go, oldest finished first (by
// name when two ended at once), until all reports together fit the bound,
// or no droppable one is left; total is what they take before. A bound of
// 0 drops nothing. It is pure.
func reportsToDrop(reports []keptReport, bound int64) (drop []string, total int64) {
	var droppable []keptReport
	for _, r := range reports {
		total += r.Bytes
		if r.Droppable && r.Bytes > 0 {
			droppable = append(droppable, r)
		}
	}
	if bound <= 0 {
		return nil, total
	}
	slices.SortFunc(droppable, func(a, b keptReport) int {
		if c := a.Finished.Compare(b.Finished); c != 0 {
			return c
		}
		return strings.Compare(a.Job, b.Job)
	})
	left := total
	for _, r := range droppable {
		if left <= bound {
			break
		}
		drop = append(drop, r.Job)
		left -= r.Bytes
	}
	return drop, total
}

// reportSweepInterval is the least time between two looks at all reports:
// a look lists every shard's metadata from the API server.
const reportSweepInterval = time.Minute

// boundReports deletes the oldest finished jobs, with their reports, while
// the reports of all jobs take more than the configuration's bound. It
// runs at most once per reportSweepInterval, from any job's pass: a report
// grows only through its job's status, which wakes that job.
func (r *Reconciler) boundReports(ctx context.Context) error {
	if r.opts.Config == nil {
		return nil
	}
	cfg, _, _ := r.opts.Config.Get()
	bound := cfg.Manager.ImageJob.Cleanup.MaxReportSize
	if bound <= 0 || !r.sweepDue() {
		return nil
	}
	var shards metav1.PartialObjectMetadataList
	shards.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	// Shards are not in the cache (cacheopts); their metadata is enough.
	if err := r.apiReader.List(ctx, &shards, client.InNamespace(r.opts.Namespace), client.HasLabels{nodereport.LabelReport}); err != nil {
		return fmt.Errorf("listing the reports' shards: %w", err)
	}
	bytes := map[types.UID]int64{}
	for i := range shards.Items {
		for _, o := range shards.Items[i].OwnerReferences {
			if o.Kind == "ImageJob" {
				bytes[o.UID] += nodereport.Bytes(&shards.Items[i])
			}
		}
	}
	var jobs eraserv1.ImageJobList
	if err := r.client.List(ctx, &jobs); err != nil {
		return fmt.Errorf("listing jobs: %w", err)
	}
	byName := map[string]*eraserv1.ImageJob{}
	var reports []keptReport
	for i := range jobs.Items {
		j := &jobs.Items[i]
		b := bytes[j.UID]
		if b == 0 {
			continue
		}
		byName[j.Name] = j
		rep := keptReport{Job: j.Name, Bytes: b}
		if end := j.Status.CompletionTime; end != nil && j.DeletionTimestamp.IsZero() {
			rep.Finished = end.Time
			rep.Droppable = !waitsForRecording(j) && j.Status.Report != nil && j.Status.Report.Complete
		}
		reports = append(reports, rep)
	}
	drop, total := reportsToDrop(reports, bound)
	for _, name := range drop {
		j := byName[name]
		msg := fmt.Sprintf("deleted with its report (%s) before keepReportFor: the reports of all jobs took %s, over manager.imageJob.cleanup.maxReportSize (%s); the oldest finished jobs go first",
			bytesize.FormatSigned(bytes[j.UID]), bytesize.FormatSigned(total), bytesize.FormatSigned(bound))
		log.FromContext(ctx).Info("report dropped early", "job", j.Name, "reportBytes", bytes[j.UID], "allReportsBytes", total, "maxReportSize", bound)
		r.recorder.Event(j, corev1.EventTypeWarning, eraserv1.ReasonReportDropped, msg)
		// A failed job's pods may still be kept (delayOnFailure).
		if err := r.deletePods(ctx, j); err != nil {
			return err
		}
		if err := r.deleteConfigMap(ctx, j.Name); err != nil {
			return err
		}
		if err := r.deleteJob(ctx, j); err != nil {
			return err
		}
		total -= bytes[j.UID]
	}
	return nil
}

// sweepDue says whether a look at all reports is due, and if so takes it.
func (r *Reconciler) sweepDue() bool {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	now := r.clock.Now()
	if !r.lastSweep.IsZero() && now.Sub(r.lastSweep) < reportSweepInterval {
		return false
	}
	r.lastSweep = now
	return true
}
