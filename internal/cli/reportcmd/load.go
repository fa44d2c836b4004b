package reportcmd

// Reading a report: the target's job, found by kind and name or through its
// ImageList, and the job's shards.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/util/kname"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// Load finds the target's job and reads its report; node, when set, keeps
// only that node (reading only its shard).
func Load(ctx context.Context, c client.Reader, target, node string) (Output, error) {
	job, note, err := findJob(ctx, c, target)
	if err != nil {
		return Output{}, err
	}
	out := Output{Job: job.Name, Phase: string(job.Status.Phase), DryRun: job.Annotations[eraserv1.AnnotationDryRun] == "true", Note: note, Nodes: []nodereport.Node{}}
	rep := job.Status.Report
	if rep == nil || rep.Namespace == "" {
		return out, fmt.Errorf("ImageJob %s has no report yet (status.report is empty; phase %q)", job.Name, job.Status.Phase)
	}
	out.Complete, out.OmittedNodes = rep.Complete, rep.OmittedNodes
	shards, err := reportshards.Shards(ctx, c, rep.Namespace, job)
	if err != nil {
		return out, err
	}
	var keep func(string) bool
	if node != "" {
		keep = func(n string) bool { return n == node }
	}
	nodes, err := nodereport.Read(shards, keep)
	if err != nil {
		return out, err
	}
	if node != "" && len(nodes) == 0 {
		return out, fmt.Errorf("node %s is not in the report of ImageJob %s (%d nodes so far, complete: %v)", node, job.Name, rep.Nodes, rep.Complete)
	}
	slices.SortFunc(nodes, func(a, b nodereport.Node) int { return strings.Compare(a.Name, b.Name) })
	out.Nodes, out.Summary = nodes, Summarize(nodes)
	return out, nil
}

// findJob resolves "imagejob/x", "imagelist/x" (their short names too) or
// a bare name; the note says what an ImageList's report leaves out.
func findJob(ctx context.Context, c client.Reader, target string) (*eraserv1.ImageJob, string, error) {
	kind, name, found := strings.Cut(target, "/")
	if !found {
		kind, name = "", target
	}
	switch strings.ToLower(kind) {
	case "", "imagejob", "imagejobs", "ij", "imagejob.eraser.sh":
		job := &eraserv1.ImageJob{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, job)
		if err == nil {
			return job, "", nil
		}
		if kind != "" || !apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("reading ImageJob %s: %w", name, err)
		}
		return listJob(ctx, c, name)
	case "imagelist", "imagelists", "il", "imagelist.eraser.sh":
		return listJob(ctx, c, name)
	}
	return nil, "", fmt.Errorf("%q: want imagelist/<name> or imagejob/<name>", target)
}

// listJob is an ImageList's last job: the one its status names, else its
// newest job still kept.
func listJob(ctx context.Context, c client.Reader, name string) (*eraserv1.ImageJob, string, error) {
	list := &eraserv1.ImageList{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, list); err != nil {
		return nil, "", fmt.Errorf("reading ImageList %s: %w", name, err)
	}
	note := deletedRun(list)
	if list.Status.Job != "" {
		job := &eraserv1.ImageJob{}
		err := c.Get(ctx, client.ObjectKey{Name: list.Status.Job}, job)
		if err == nil {
			return job, note, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("reading ImageJob %s: %w", list.Status.Job, err)
		}
	}
	var jobs eraserv1.ImageJobList
	if err := c.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: kname.LabelValue(name)}); err != nil {
		return nil, "", fmt.Errorf("listing the jobs of ImageList %s: %w", name, err)
	}
	var newest *eraserv1.ImageJob
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !metav1.IsControlledBy(j, list) {
			continue
		}
		if newest == nil || j.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = j
		}
	}
	if newest == nil {
		msg := fmt.Sprintf("ImageList %s has no job kept (its report goes with the job, manager.imageJob.cleanup.keepReportFor after the run)", name)
		if note != "" {
			msg += "; " + note
		}
		return nil, "", errors.New(msg)
	}
	return newest, note, nil
}

// deletedRun says so when the list's current run was deleted before it
// finished: a report is written once a run has ended, so that run has none,
// and the report shown is of an earlier run.
func deletedRun(list *eraserv1.ImageList) string {
	c := meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady)
	if c == nil || c.Reason != eraserv1.ReasonRunDeleted {
		return ""
	}
	return fmt.Sprintf("the run of generation %d was deleted before it finished and has no report (its nodes' outcomes are unknown); this is the last run recorded before it", c.ObservedGeneration)
}
