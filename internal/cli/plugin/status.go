package plugin

// kubectl eraser status: what Eraser does now, and what it will do next.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/pause"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

// Status is the -o json form.
type Status struct {
	Namespace string    `json:"namespace"`
	Paused    *Pause    `json:"paused,omitempty"`
	Lists     []List    `json:"imageLists"`
	Schedule  *Schedule `json:"schedule,omitempty"`
	Jobs      []Job     `json:"runningJobs"`
	// Space is what the runs kept in the cluster freed and what came back.
	Space    *Space    `json:"space,omitempty"`
	Problems []string  `json:"problems,omitempty"`
	Now      time.Time `json:"now"`
}

// Pause is the switch, when set.
type Pause struct {
	Since  time.Time `json:"since"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// List is an ImageList's last and current run.
type List struct {
	Name string `json:"name"`
	// State is its Ready condition's reason: Running, Queued, Succeeded,
	// Paused, NotRunOnAdoption, ...
	State   string     `json:"state"`
	Message string     `json:"message,omitempty"`
	LastRun *time.Time `json:"lastRunFinished,omitempty"`
	Job     string     `json:"lastJob,omitempty"`
	// QueuedBehind is the run it waits for on some nodes.
	QueuedBehind string `json:"queuedBehind,omitempty"`
	// RunNow is a run-now request not yet taken.
	RunNow bool `json:"runNowPending,omitempty"`
}

// Schedule is the scheduled runs' rhythm.
type Schedule struct {
	Enabled     bool       `json:"enabled"`
	Every       string     `json:"every,omitempty"`
	Cron        string     `json:"cron,omitempty"`
	Scanner     bool       `json:"scanner"`
	DryRun      bool       `json:"dryRun,omitempty"`
	LastStart   *time.Time `json:"lastStart,omitempty"`
	LastEnd     *time.Time `json:"lastEnd,omitempty"`
	LastSuccess *time.Time `json:"lastSuccess,omitempty"`
	// Next is when the next run is due; zero when it waits for the
	// manager (its first start) or for the running one.
	Next     *time.Time `json:"next,omitempty"`
	NextNote string     `json:"nextNote,omitempty"`
	RunNow   bool       `json:"runNowPending,omitempty"`
}

// Job is a run going on.
type Job struct {
	Name string `json:"name"`
	// For is "imagelist/<name>", "schedule" or "catch-up".
	For          string `json:"for"`
	Eligible     int    `json:"eligible"`
	Started      int    `json:"started"`
	Succeeded    int    `json:"succeeded"`
	Failed       int    `json:"failed"`
	Waiting      int    `json:"waiting"`
	QueuedBehind string `json:"queuedBehind,omitempty"`
	State        string `json:"state"`
	Message      string `json:"message,omitempty"`
}

func statusFlags(fs *flag.FlagSet) func(context.Context, env, []string) int {
	output := fs.String("o", "text", "output format: text or json")
	return func(ctx context.Context, e env, operands []string) int {
		if len(operands) != 0 || (*output != "text" && *output != "json") {
			fmt.Fprintln(e.errOut, "usage: kubectl eraser status [-o text|json]")
			return ExitUsage
		}
		s, err := Collect(ctx, e.c, e.namespace, time.Now())
		if err != nil {
			fmt.Fprintln(e.errOut, err)
			return ExitFailed
		}
		if *output == "json" {
			enc := json.NewEncoder(e.out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(s); err != nil {
				return ExitFailed
			}
			return ExitOK
		}
		PrintStatus(e.out, s)
		return ExitOK
	}
}

// Collect reads the status from the cluster.
func Collect(ctx context.Context, c client.Reader, namespace string, now time.Time) (Status, error) {
	s := Status{Namespace: namespace, Now: now.UTC(), Lists: []List{}, Jobs: []Job{}}
	held, err := readPause(ctx, c, namespace)
	if err != nil {
		return s, err
	}
	if held.Paused {
		s.Paused = &Pause{Since: held.Since.UTC(), By: held.By, Reason: held.Reason}
	}
	var lists eraserv1.ImageListList
	if err := c.List(ctx, &lists); err != nil {
		return s, fmt.Errorf("listing ImageLists: %w", err)
	}
	for _, l := range lists.Items {
		item := List{Name: l.Name, Job: l.Status.Job, QueuedBehind: l.Status.QueuedBehind, State: "New"}
		_, item.RunNow = l.Annotations[eraserv1.AnnotationRunNow]
		if ts := l.Status.Timestamp; ts != nil {
			t := ts.UTC()
			item.LastRun = &t
		}
		if cond := meta.FindStatusCondition(l.Status.Conditions, eraserv1.ConditionReady); cond != nil {
			item.State, item.Message = cond.Reason, cond.Message
		}
		s.Lists = append(s.Lists, item)
	}
	slices.SortFunc(s.Lists, func(a, b List) int { return strings.Compare(a.Name, b.Name) })
	var jobs eraserv1.ImageJobList
	if err := c.List(ctx, &jobs); err != nil {
		return s, fmt.Errorf("listing ImageJobs: %w", err)
	}
	scheduledRunning := false
	for _, j := range jobs.Items {
		if j.Status.Phase != eraserv1.PhaseRunning && j.Status.Phase != "" {
			continue
		}
		job := Job{Name: j.Name, For: jobFor(&j), Eligible: j.Status.Desired - j.Status.Skipped, Started: j.Status.Started - j.Status.Waiting,
			Succeeded: j.Status.Succeeded, Failed: j.Status.Failed, Waiting: j.Status.Waiting, QueuedBehind: j.Status.QueuedBehind, State: "Starting"}
		if cond := meta.FindStatusCondition(j.Status.Conditions, eraserv1.ConditionReady); cond != nil {
			job.State, job.Message = cond.Reason, cond.Message
		}
		if j.Labels[eraserv1.LabelJobOwner] == eraserv1.JobOwnerCollector {
			scheduledRunning = true
		}
		s.Jobs = append(s.Jobs, job)
	}
	slices.SortFunc(s.Jobs, func(a, b Job) int { return strings.Compare(a.Name, b.Name) })
	s.Space = space(jobs.Items)
	sched, problem, err := schedule(ctx, c, namespace, now, scheduledRunning, held.Paused)
	if err != nil {
		return s, err
	}
	s.Schedule = sched
	if problem != "" {
		s.Problems = append(s.Problems, problem)
	}
	return s, nil
}

func jobFor(j *eraserv1.ImageJob) string {
	switch {
	case j.Labels[eraserv1.LabelJobOwner] == eraserv1.JobOwnerImageList:
		for _, o := range j.OwnerReferences {
			if o.Kind == "ImageList" {
				return "imagelist/" + o.Name
			}
		}
		return "imagelist/" + j.Labels[eraserv1.LabelImageList]
	case j.Annotations[eraserv1.AnnotationCatchUp] != "":
		return "catch-up"
	}
	return "schedule"
}

// schedule reads the configuration and the schedule's state; a problem is
// what keeps it from saying when the next run is.
func schedule(ctx context.Context, c client.Reader, namespace string, now time.Time, running, paused bool) (*Schedule, string, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: config.ConfigMapName}, cm)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("no ConfigMap %s in namespace %s: is Eraser installed there? (-n)", config.ConfigMapName, namespace), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading the configuration: %w", err)
	}
	cfg, _, err := config.Parse([]byte(cm.Data[config.ConfigKey]))
	if err != nil {
		return nil, fmt.Sprintf("the configuration in ConfigMap %s is invalid (kubectl eraser config check): %v", config.ConfigMapName, err), nil
	}
	sc := cfg.Manager.Scheduling
	out := &Schedule{Enabled: cfg.Components.Collector.Enabled, Cron: sc.Cron, Scanner: cfg.Components.Scanner.Enabled, DryRun: sc.DryRun}
	if sc.Cron == "" {
		out.Every = sc.RepeatInterval.String()
	}
	if !out.Enabled {
		return out, "", nil
	}
	state := &corev1.ConfigMap{}
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: schedtimes.StateName}, state)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("reading the schedule's state: %w", err)
	}
	_, out.RunNow = state.Annotations[eraserv1.AnnotationRunNow]
	t := schedtimes.Read(state.Data)
	out.LastStart, out.LastEnd, out.LastSuccess = timePtr(t.LastStart), timePtr(t.LastEnd), timePtr(t.LastSuccess)
	switch {
	case running:
		out.NextNote = "after the scheduled run going now ends"
	case t.LastStart.IsZero() && t.LastEnd.IsZero() && sc.BeginImmediately:
		out.NextNote = "when the manager starts"
	default:
		next := schedtimes.Next(sc, t, now)
		out.Next = timePtr(next)
		if !next.After(now) {
			out.NextNote = "due now"
		}
	}
	if paused {
		out.NextNote = strings.TrimPrefix(out.NextNote+"; held by the pause", "; ")
	}
	return out, "", nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// PrintStatus writes the text form.
func PrintStatus(w io.Writer, s Status) {
	if s.Paused != nil {
		p := pause.State{Paused: true, Since: s.Paused.Since, By: s.Paused.By, Reason: s.Paused.Reason}
		fmt.Fprintf(w, "Eraser (namespace %s): PAUSED since %s%s: no run or wave starts; kubectl eraser resume\n", s.Namespace, ago(s.Paused.Since, s.Now), byWhom(p))
	} else {
		fmt.Fprintf(w, "Eraser (namespace %s): running\n", s.Namespace)
	}
	for _, p := range s.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	fmt.Fprintln(w)
	if len(s.Lists) == 0 {
		fmt.Fprintln(w, "ImageLists: none")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "IMAGELIST\tSTATE\tLAST RUN ENDED\tLAST JOB\tWAITS FOR")
		for _, l := range s.Lists {
			state := l.State
			if l.RunNow {
				state += " (run-now requested)"
			}
			last := "never"
			if l.LastRun != nil {
				last = ago(*l.LastRun, s.Now)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Name, state, last, dash(l.Job), dash(l.QueuedBehind))
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
	switch sc := s.Schedule; {
	case sc == nil:
	case !sc.Enabled:
		fmt.Fprintln(w, "Schedule: off (components.collector.enabled is false)")
	default:
		every := "every " + sc.Every + " from the end of the last run"
		if sc.Cron != "" {
			every = "at cron " + sc.Cron
		}
		scanner := "scanner on: only vulnerable images go"
		if !sc.Scanner {
			scanner = "scanner off: every unused image goes"
		}
		if sc.DryRun {
			scanner += ", dry run"
		}
		fmt.Fprintf(w, "Schedule: %s (%s)\n", every, scanner)
		fmt.Fprintf(w, "  last start %s, last end %s, last success %s\n", agoPtr(sc.LastStart, s.Now), agoPtr(sc.LastEnd, s.Now), agoPtr(sc.LastSuccess, s.Now))
		next := sc.NextNote
		if sc.Next != nil {
			next = strings.TrimSuffix(fmt.Sprintf("%s %s", sc.Next.Format(time.RFC3339), paren(sc.NextNote)), " ")
		}
		if sc.RunNow {
			next += "; a run-now request is pending"
		}
		fmt.Fprintf(w, "  next run: %s\n", next)
	}
	printSpace(w, s.Space)
	fmt.Fprintln(w)
	if len(s.Jobs) == 0 {
		fmt.Fprintln(w, "Running: nothing")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNNING JOB\tFOR\tDONE\tRUNNING\tWAITING\tBEHIND\tSTATE")
	for _, j := range s.Jobs {
		done := j.Succeeded + j.Failed
		fmt.Fprintf(tw, "%s\t%s\t%d/%d (%d failed)\t%d\t%d\t%s\t%s\n", j.Name, j.For, done, j.Eligible, j.Failed, max(j.Started-done, 0), j.Waiting, dash(j.QueuedBehind), j.State)
	}
	_ = tw.Flush()
}

func ago(t, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return t.Format(time.RFC3339)
	}
	return fmt.Sprintf("%s (%s ago)", t.Format(time.RFC3339), d)
}

func agoPtr(t *time.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	return ago(*t, now)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}
