package plugin

// kubectl eraser plan: what a run of "*" would remove, from a dry run.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/cli/reportcmd"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// LabelPlan marks the dry-run ImageLists the plan command creates.
const LabelPlan = "eraser.sh/plan"

// Plan is the -o json form.
type Plan struct {
	Job      string     `json:"job"`
	Complete bool       `json:"complete"`
	Nodes    []PlanNode `json:"nodes"`
	Images   []PlanImg  `json:"images"`
	// Images and bytes over every node.
	TotalImages int    `json:"totalImages"`
	TotalBytes  uint64 `json:"totalBytes"`
	// Kept counts the images the run would keep, over every node, by why:
	// in use, too young, referenced, excluded, ...
	Kept map[string]int `json:"kept,omitempty"`
	// NotJudged are nodes whose worker failed or never ran: nothing is
	// known of what they would lose.
	NotJudged []string `json:"notJudged,omitempty"`
}

// PlanNode is what one node would lose.
type PlanNode struct {
	Name   string `json:"node"`
	Images int    `json:"images"`
	Bytes  uint64 `json:"bytes"`
	// Unavailable says why the node's images are not named (its worker's
	// log could not be read): its counts are the worker's own totals.
	Unavailable string `json:"unavailable,omitempty"`
}

// PlanImg is one image across the nodes that would lose it: pulling it
// back onto each costs its size there.
type PlanImg struct {
	Image string `json:"image"`
	Nodes int    `json:"nodes"`
	// Bytes is its size summed over those nodes: what pulling it back
	// everywhere would transfer, at most (shared layers pull once per node).
	Bytes uint64 `json:"bytes"`
}

func planFlags(fs *flag.FlagSet) func(context.Context, env, []string) int {
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the dry run's report")
	keep := fs.Bool("keep", false, "keep the dry-run ImageList (and so its report) instead of deleting it")
	output := fs.String("o", "text", "output format: text or json")
	return func(ctx context.Context, e env, operands []string) int {
		if len(operands) != 0 || (*output != "text" && *output != "json") {
			fmt.Fprintln(e.errOut, "usage: kubectl eraser plan [--timeout 10m] [--keep] [-o text|json]")
			return ExitUsage
		}
		if held, err := pause.Read(ctx, e.c, e.namespace); err != nil || held.Paused {
			if err == nil {
				err = errors.New("Eraser is paused, and a plan is a (dry) run: kubectl eraser resume first")
			}
			fmt.Fprintln(e.errOut, err)
			return ExitFailed
		}
		list := &eraserv1.ImageList{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("eraser-plan-%d", time.Now().Unix()), Labels: map[string]string{LabelPlan: "true"}},
			Spec:       eraserv1.ImageListSpec{Images: []string{"*"}, DryRun: true},
		}
		if err := e.c.Create(ctx, list); err != nil {
			fmt.Fprintf(e.errOut, "creating the dry-run ImageList: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintf(e.errOut, "dry run: ImageList %s (images [\"*\"], dryRun: true); waiting for its report (up to %s)...\n", list.Name, *timeout)
		if !*keep {
			defer func() {
				// The report goes with the list's job; what was printed stays.
				_ = e.c.Delete(context.WithoutCancel(ctx), list)
			}()
		}
		out, err := waitReport(ctx, e.c, list.Name, *timeout)
		if err != nil {
			fmt.Fprintln(e.errOut, err)
			return ExitFailed
		}
		p := Summarize(out)
		if *output == "json" {
			enc := json.NewEncoder(e.out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(p); err != nil {
				return ExitFailed
			}
			return ExitOK
		}
		PrintPlan(e.out, p)
		return ExitOK
	}
}

// waitReport waits for the list's run to finish and its report to be
// complete.
func waitReport(ctx context.Context, c client.Client, name string, timeout time.Duration) (reportcmd.Output, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		list := &eraserv1.ImageList{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, list); err == nil && list.Status.Job != "" && list.Status.ObservedGeneration == list.Generation {
			out, err := reportcmd.Load(ctx, c, "imagelist/"+name, "")
			if err == nil && out.Complete {
				return out, nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("the run has not finished")
			}
			return reportcmd.Output{}, fmt.Errorf("no complete report of ImageList %s within %s (%v): kubectl eraser status says why it waits", name, timeout, last)
		case <-time.After(2 * time.Second):
		}
	}
}

// Summarize totals what the dry run would have removed, by node and by
// image.
func Summarize(out reportcmd.Output) Plan {
	p := Plan{Job: out.Job, Complete: out.Complete, Nodes: []PlanNode{}, Images: []PlanImg{}}
	images := map[string]*PlanImg{}
	for _, n := range out.Nodes {
		kind, _ := n.Kind()
		if n.Failed || kind == nodereport.KindSkipped || n.Reason != "" {
			p.NotJudged = append(p.NotJudged, n.Name)
			continue
		}
		pn := PlanNode{Name: n.Name}
		for _, e := range n.Entries {
			if e.Outcome != string(workerresult.Removed) {
				if p.Kept == nil {
					p.Kept = map[string]int{}
				}
				p.Kept[e.Outcome]++
				continue
			}
			pn.Images++
			pn.Bytes += e.Bytes
			img := images[e.Image]
			if img == nil {
				img = &PlanImg{Image: e.Image}
				images[e.Image] = img
			}
			img.Nodes++
			img.Bytes += e.Bytes
		}
		switch {
		case n.Unavailable != "":
			pn.Unavailable = n.Unavailable
		case n.Omitted > 0:
			pn.Unavailable = fmt.Sprintf("%d images left out of the report to bound it", n.Omitted)
		}
		if pn.Unavailable != "" {
			// The worker's own totals hold whatever its log says.
			pn.Images, pn.Bytes = n.Counts[string(workerresult.Removed)], n.BytesFreed
		}
		p.TotalImages += pn.Images
		p.TotalBytes += pn.Bytes
		p.Nodes = append(p.Nodes, pn)
	}
	for _, img := range images {
		p.Images = append(p.Images, *img)
	}
	slices.SortFunc(p.Images, func(a, b PlanImg) int {
		if a.Bytes != b.Bytes {
			if a.Bytes > b.Bytes {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Image, b.Image)
	})
	return p
}

// PrintPlan writes the text form.
func PrintPlan(w io.Writer, p Plan) {
	fmt.Fprintf(w, "A run of \"*\" now would remove %d images, %s, on %d nodes (dry run %s; nothing was removed).\n",
		p.TotalImages, bytesize.Format(p.TotalBytes), len(p.Nodes), p.Job)
	if len(p.Kept) > 0 {
		var kept []string
		for _, why := range slices.Sorted(maps.Keys(p.Kept)) {
			kept = append(kept, fmt.Sprintf("%d %s", p.Kept[why], why))
		}
		fmt.Fprintf(w, "It would keep: %s (with --keep, kubectl eraser report imagelist/<the plan's list> names each and why).\n", strings.Join(kept, ", "))
	}
	if len(p.NotJudged) > 0 {
		fmt.Fprintf(w, "Not judged (the worker failed or did not run): %s\n", strings.Join(p.NotJudged, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tIMAGES\tSIZE\tNOTE")
	for _, n := range p.Nodes {
		note := ""
		if n.Unavailable != "" {
			note = "images not named: " + n.Unavailable
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", n.Name, n.Images, bytesize.Format(n.Bytes), note)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tNODES\tTO PULL AGAIN EVERYWHERE")
	for _, img := range p.Images {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", img.Image, img.Nodes, bytesize.Format(img.Bytes))
	}
	_ = tw.Flush()
}
