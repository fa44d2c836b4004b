package reportcmd

// The text form of a report.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

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
	for _, line := range freedLines(out.Nodes) {
		fmt.Fprintln(w, line)
	}
	for _, line := range reliefLines(out.Nodes) {
		fmt.Fprintln(w, line)
	}
	for _, line := range regretLines(out.Nodes) {
		fmt.Fprintln(w, line)
	}
	for _, line := range registryLines(out.Nodes) {
		fmt.Fprintln(w, line)
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

// freedLines say what the removals freed, as one figure (the same the
// ImageList's and ImageJob's status.results.freed give), then what they
// should have freed and what was measured, then each node whose two
// differ beyond the tolerance, with the likely cause.
func freedLines(nodes []nodereport.Node) []string {
	var expected uint64
	var measured, freed int64
	var known, measuredOn, reported int
	dryRun := false
	var out []string
	for _, n := range nodes {
		f := n.Freed
		if f == nil && n.BytesFreed == 0 {
			continue
		}
		reported++
		dryRun = dryRun || n.DryRun
		freed += workerresult.FreedBytes(n.BytesFreed, f)
		if f == nil {
			continue
		}
		known++
		expected += f.ExpectedBytes
		if f.MeasuredBy != "" {
			measuredOn++
			measured += f.MeasuredBytes
		}
		if f.Note != "" {
			out = append(out, fmt.Sprintf("  %s: %s", n.Name, oneLine(f.Note)))
		}
		if f.Error != "" {
			out = append(out, fmt.Sprintf("  %s: not measured: %s", n.Name, oneLine(f.Error)))
		}
	}
	if reported == 0 {
		return nil
	}
	verb := "space freed"
	if dryRun {
		verb = "space a removal would free"
	}
	head := fmt.Sprintf("%s: %s", verb, bytesize.FormatSigned(freed))
	switch {
	case measuredOn == reported:
		head += fmt.Sprintf(" (measured on %d nodes); %s expected (the removed images' own content)", measuredOn, bytesize.Format(expected))
	case measuredOn > 0:
		head += fmt.Sprintf(" (measured on %d of %d nodes, estimated on the others); %s expected on %d nodes (the removed images' own content)", measuredOn, reported, bytesize.Format(expected), known)
	case known == reported:
		head += fmt.Sprintf(" (expected on %d nodes: the removed images' own content)", known)
	default:
		head += fmt.Sprintf(" (expected on %d of %d nodes, the others' as the runtime reported the images' sizes)", known, reported)
	}
	return append([]string{head}, out...)
}

// regretLines say what came back after earlier removals: the total, then
// each node's newest returns.
func regretLines(nodes []nodereport.Node) []string {
	var returns int
	var bytes uint64
	var out []string
	for _, n := range nodes {
		r := n.Regret
		if r == nil || r.Returns == 0 {
			continue
		}
		returns += r.Returns
		bytes += r.BytesReturned
		for _, e := range r.Recent {
			name := e.Repository
			if name == "" {
				name = e.Image
			}
			run := e.Run
			if run == "" {
				run = "eraser node prune"
			}
			out = append(out, fmt.Sprintf("  %s: %s (%s) removed by %s (%s) at %s, back %s later", n.Name, name, bytesize.Format(e.Bytes), run, e.Policy,
				e.RemovedAt.UTC().Format(time.RFC3339), e.ReturnedAt.Sub(e.RemovedAt).Round(time.Second)))
		}
	}
	if returns == 0 {
		return nil
	}
	return append([]string{fmt.Sprintf("came back after earlier removals: %d images, %s pulled again", returns, bytesize.Format(bytes))}, out...)
}

// registryLines say what the images' registries answered before removals
// of images a workload may need again: the totals, then each node's first
// answers that kept an image.
func registryLines(nodes []nodereport.Node) []string {
	total := map[string]int{}
	var requests, cached int
	var out []string
	for _, n := range nodes {
		rc := n.RegistryChecks
		if rc == nil {
			continue
		}
		for k, v := range rc.Counts {
			total[k] += v
		}
		requests += rc.Requests
		cached += rc.Cached
		for _, c := range rc.First {
			if c.Answer != "present" {
				out = append(out, fmt.Sprintf("  %s: %s: %s (%s)", n.Name, c.Image, c.Answer, c.Detail))
			}
		}
		if rc.Error != "" {
			out = append(out, fmt.Sprintf("  %s: %s", n.Name, rc.Error))
		}
	}
	if len(total) == 0 {
		return nil
	}
	head := fmt.Sprintf("registry checks: %d present, %d gone, %d unknown (%d requests, %d answers cached)",
		total["present"], total["gone"], total["unknown"], requests, cached)
	return append([]string{head}, out...)
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

// reliefLines say, for the nodes a run found under disk pressure, how many
// a measurement showed below their target after the removals and the
// longest it took, then each node that is not.
func reliefLines(nodes []nodereport.Node) []string {
	var under, reached int
	var longest float64
	var out []string
	for _, n := range nodes {
		fs := n.ImageFs
		if fs == nil || fs.TargetBytes == 0 || n.DryRun {
			continue
		}
		under++
		if fs.TargetReached {
			reached++
			longest = max(longest, fs.TimeToTargetMs)
			continue
		}
		out = append(out, fmt.Sprintf("  %s: %s", n.Name, fs.Relief()))
	}
	if under == 0 {
		return nil
	}
	head := fmt.Sprintf("disk pressure: %d of %d nodes under pressure brought below their target", reached, under)
	if reached > 0 {
		head += fmt.Sprintf(", the slowest %s after its first removal for it", time.Duration(longest*float64(time.Millisecond)).Round(time.Millisecond))
	}
	return append([]string{head}, out...)
}
