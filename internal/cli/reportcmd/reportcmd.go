// Package reportcmd is `kubectl eraser report`: it prints a job's per-node
// report (what each node removed, kept and why, and failed to remove) from
// the ConfigMap shards the manager wrote, long after the worker pods are
// gone.
package reportcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/cli/bytesize"
	"github.com/eraser-oss/eraser/internal/manager/scheme"
	"github.com/eraser-oss/eraser/internal/wire/kname"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// Exit codes, as the eraser CLI's.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Usage is the plugin's help.
const Usage = `usage: kubectl eraser report <imagelist|imagejob>/<name> [--node NODE] [-o text|json]
       kubectl eraser report <name>   (an ImageJob, else an ImageList of that name)

Prints what each node removed, kept (and why) and failed to remove in the
job's run (an ImageList's: its last run), from the report the manager keeps
for manager.imageJob.cleanup.keepReportFor after the run.
`

// Output is the -o json form.
type Output struct {
	Job      string `json:"job"`
	Phase    string `json:"phase"`
	DryRun   bool   `json:"dryRun,omitempty"`
	Complete bool   `json:"complete"`
	// OmittedNodes were left out of a report that reached its size cap.
	OmittedNodes int `json:"omittedNodes,omitempty"`
	// Note says what the report cannot: an ImageList's newer run that was
	// deleted before it finished, and so has none.
	Note    string            `json:"note,omitempty"`
	Summary Summary           `json:"summary"`
	Nodes   []nodereport.Node `json:"nodes"`
}

// Summary counts the nodes shown by what happened on them.
type Summary struct {
	// Succeeded nodes' workers ran and did not fail.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// NotStarted nodes never had a worker pod: the run ended first, or
	// gave up waiting for the node.
	NotStarted int `json:"notStarted"`
	Skipped    int `json:"skipped"`
}

// Summarize counts the nodes.
func Summarize(nodes []nodereport.Node) Summary {
	var s Summary
	for _, n := range nodes {
		kind, _ := n.Kind()
		switch {
		case n.Failed:
			s.Failed++
		case kind == nodereport.KindSkipped:
			s.Skipped++
		case n.Reason != "":
			// NotStarted, or a reason of a newer manager's: a node that
			// did not fail has a reason only if its worker did not run.
			s.NotStarted++
		default:
			s.Succeeded++
		}
	}
	return s
}

// String is the summary's nonzero counts, for the text form.
func (s Summary) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{s.Succeeded, "succeeded"}, {s.Failed, "failed"}, {s.NotStarted, "not started"}, {s.Skipped, "skipped"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

// Main runs `kubectl eraser <args>` and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "report" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, Usage)
			return ExitOK
		}
		fmt.Fprint(stderr, Usage)
		return ExitUsage
	}
	fs := flag.NewFlagSet("kubectl eraser report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage); fs.PrintDefaults() }
	node := fs.String("node", "", "print only this node")
	output := fs.String("o", "text", "output format: text or json")
	kubeconfig := fs.String("kubeconfig", "", "path to the kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "the kubeconfig context to use")
	// Flags may follow the target, as with kubectl.
	var target string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return ExitOK
			}
			return ExitUsage
		}
		rest = fs.Args()
		if len(rest) > 0 {
			if target != "" {
				fmt.Fprintf(stderr, "one target, got %q and %q\n", target, rest[0])
				return ExitUsage
			}
			target, rest = rest[0], rest[1:]
		}
	}
	if target == "" || (*output != "text" && *output != "json") {
		fs.Usage()
		return ExitUsage
	}
	c, err := newClient(*kubeconfig, *kubeContext)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	out, err := Load(ctx, c, target, *node)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return ExitFailed
		}
		return ExitOK
	}
	Print(stdout, out)
	return ExitOK
}

func newClient(kubeconfig, kubeContext string) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	sch, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return c, nil
}

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
	shards, err := nodereport.Shards(ctx, c, rep.Namespace, job)
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

// Print writes the report as a table, a line per image, and a line per node
// whose entries are missing or trimmed.
func Print(w io.Writer, out Output) {
	state := "complete"
	if !out.Complete {
		state = "incomplete (nodes are still being read)"
	}
	dry := ""
	if out.DryRun {
		dry = ", dry run: nothing was removed, \"removed\" is what would have been"
	}
	summary := ""
	if s := Summarize(out.Nodes).String(); s != "" {
		summary = ": " + s
	}
	fmt.Fprintf(w, "ImageJob %s: %s, report %s, %d nodes%s%s\n", out.Job, out.Phase, state, len(out.Nodes), summary, dry)
	if out.Note != "" {
		fmt.Fprintf(w, "note: %s\n", out.Note)
	}
	if out.OmittedNodes > 0 {
		fmt.Fprintf(w, "%d nodes left out: the report reached its size cap\n", out.OmittedNodes)
	}
	for _, db := range scanDBs(out.Nodes) {
		fmt.Fprintln(w, db)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tOUTCOME\tIMAGE\tPOLICY\tSIZE\tDETAIL")
	for _, n := range out.Nodes {
		kind, cause := n.Kind()
		if cause == "" {
			cause = n.Reason
		}
		switch {
		case n.Failed:
			fmt.Fprintf(tw, "%s\t(node failed)\t\t%s\t\t%s\n", n.Name, n.Reason, oneLine(n.Message))
		case kind == nodereport.KindSkipped:
			fmt.Fprintf(tw, "%s\t(skipped)\t\t%s\t\t%s\n", n.Name, cause, oneLine(n.Message))
		case n.Reason != "":
			fmt.Fprintf(tw, "%s\t(not started)\t\t%s\t\t%s\n", n.Name, cause, oneLine(n.Message))
		}
		if n.Unavailable != "" {
			detail := oneLine(n.Unavailable)
			if len(n.Counts) > 0 {
				detail += "; counts: " + counts(n.Counts)
			}
			fmt.Fprintf(tw, "%s\t(no entries)\t\t\t\t%s\n", n.Name, detail)
		}
		for _, e := range n.Entries {
			size := ""
			if e.Bytes > 0 {
				size = bytesize.Format(e.Bytes)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, e.Outcome, e.Image, e.Policy, size, oneLine(e.Detail))
		}
		if n.Omitted > 0 {
			fmt.Fprintf(tw, "%s\t(%d more)\t\t\t\tleft out to bound the report; counts: %s\n", n.Name, n.Omitted, counts(n.Counts))
		}
	}
	_ = tw.Flush()
}

// scanDBs says which vulnerability DBs the nodes' scanners judged with:
// one line per DB, with how many nodes used it (nodes download their own,
// so a run may span a DB update).
func scanDBs(nodes []nodereport.Node) []string {
	seen := map[string]int{}
	for _, n := range nodes {
		if db := n.ScanDB; db != nil {
			line := fmt.Sprintf("vulnerability DB: schema %d", db.Version)
			if db.UpdatedAt != nil {
				line += ", built " + db.UpdatedAt.UTC().Format(time.RFC3339)
			}
			if db.NextUpdate != nil {
				line += ", next update " + db.NextUpdate.UTC().Format(time.RFC3339)
			}
			seen[line]++
		}
	}
	out := make([]string, 0, len(seen))
	for line, n := range seen {
		out = append(out, fmt.Sprintf("%s (%d nodes)", line, n))
	}
	slices.Sort(out)
	return out
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
