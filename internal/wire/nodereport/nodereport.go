// Package nodereport is a job's per-node report: what each node removed,
// kept (and why) and failed to remove. The manager reads each node's result
// lines from its workers' logs before their pods are deleted, and stores
// them in ConfigMaps (shards) that outlive the pods; `kubectl eraser report`
// reads them back.
//
// A report is bounded whatever the cluster's size: each shard is gzip'd
// JSON of at most ShardBudget bytes, holding whole nodes and its own table
// of the image names they mention (nodes of one pool share most images, so
// a name is stored once per shard, not once per node). A node whose entries
// alone would not fit keeps its counts, removals and failures, and drops
// kept entries first (Omitted counts them). A job has at most
// eraserv1.MaxReportConfigMaps shards; nodes beyond them keep only the
// counts the job's status totals.
package nodereport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Entry is one image's outcome on one node.
type Entry struct {
	// Image is the image's first name, or the ImageList entry as written,
	// or the image ID when it has no name.
	Image string `json:"image"`
	// ID is the runtime's image ID, when an image matched.
	ID      string `json:"id,omitempty"`
	Outcome string `json:"outcome"`
	// Policy chose a removed (or failed) image: Listed, Unused, ...
	Policy string `json:"policy,omitempty"`
	// Bytes is the image's size: freed when removed.
	Bytes  uint64 `json:"bytes,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Scan is the scanner's verdict, on a scanner's entry.
	Scan *workerresult.Scan `json:"scan,omitempty"`
}

// Node is one node's part of the report.
type Node struct {
	Name string `json:"node"`
	// Failed says the node's worker failed; Reason and Message say why, as
	// the job's status does.
	Failed  bool   `json:"failed,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	DryRun  bool   `json:"dryRun,omitempty"`
	// Counts are the worker's own totals per outcome (its termination
	// message): exact even when entries are omitted or unavailable.
	Counts     map[string]int `json:"counts,omitempty"`
	BytesFreed uint64         `json:"bytesFreed,omitempty"`
	// Freed compares what the removals should have freed with what they
	// did.
	Freed *workerresult.Freed `json:"freed,omitempty"`
	// ImageFs is the image filesystem around the removals, when the
	// disk-pressure policy measured it: under pressure, its target and
	// how the run reached it.
	ImageFs *workerresult.ImageFs `json:"imageFs,omitempty"`
	Entries []Entry               `json:"entries,omitempty"`
	// Omitted counts entries left out to keep the report bounded.
	Omitted int `json:"omitted,omitempty"`
	// Unavailable says why the entries could not be read (the log was gone
	// or unreachable); the counts still hold.
	Unavailable string `json:"unavailable,omitempty"`
	// ScanDB is the vulnerability DB the node's scanner judged with.
	ScanDB *workerresult.ScanDB `json:"scanDB,omitempty"`
	// Regret is what came back to the node after earlier removals, as its
	// remover reported it.
	Regret *workerresult.Regret `json:"regret,omitempty"`
	// RegistryChecks are the registries' answers about the images an
	// automatic policy chose that a workload may need again.
	RegistryChecks *workerresult.RegistryChecks `json:"registryChecks,omitempty"`
}

// maxLine bounds one log line; a longer line is not a result line.
const maxLine = 64 << 10

// maxDetail bounds an entry's detail, as the job's status bounds messages.
const maxDetail = 300

// resultLine is a worker's JSON log line as a result line.
type resultLine struct {
	Msg string `json:"msg"`
	Line
}

// ParseLog reads a worker container's log and returns its result lines in
// order; other lines (and lines that are not JSON) are skipped. It stops
// after limit entries and says how many more there were.
func ParseLog(r io.Reader, limit int) (entries []Entry, more int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 && bytes.Contains(line, []byte(`"msg":"`+Message+`"`)) {
			var l resultLine
			if json.Unmarshal(line, &l) == nil && l.Msg == Message && l.Outcome != "" {
				if len(entries) >= limit {
					more++
				} else {
					entries = append(entries, entryOf(l.Line))
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return entries, more, nil
		}
		if err != nil {
			return entries, more, fmt.Errorf("reading the log: %w", err)
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// maxLine is returned empty (skipped) after being read to its end.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(frag) > maxLine {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, err
		}
		return bytes.TrimRight(buf, "\r\n"), err
	}
}

func entryOf(l Line) Entry {
	e := Entry{Image: l.Target, ID: l.Image, Outcome: l.Outcome, Policy: l.Policy, Bytes: l.Bytes, Detail: clip(l.Detail), Scan: bounded(l.Scan)}
	if len(l.Names) > 0 {
		e.Image = l.Names[0]
	}
	if e.Image == e.ID {
		// "*" targets are image IDs: say it once.
		e.ID = ""
		if e.Image == "" {
			e.Image = l.Image
		}
	}
	return e
}

// bounded is a verdict as the report keeps it: at most MaxFindings, each
// field clipped, whatever the log line held.
func bounded(s *workerresult.Scan) *workerresult.Scan {
	if s == nil {
		return nil
	}
	out := *s
	out.Verdict = clip(out.Verdict)
	if n := len(out.Findings); n > workerresult.MaxFindings {
		out.Findings, out.MoreFindings = out.Findings[:workerresult.MaxFindings], out.MoreFindings+n-workerresult.MaxFindings
	}
	out.Findings = slices.Clone(out.Findings)
	for i, f := range out.Findings {
		out.Findings[i] = workerresult.Finding{ID: clipTo(f.ID, 64), Severity: clipTo(f.Severity, 16), Package: clipTo(f.Package, 128), FixedVersion: clipTo(f.FixedVersion, 128)}
	}
	return &out
}

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func clip(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	return s[:maxDetail-3] + "..."
}

// kept reports an outcome that is not an action: dropped first when a
// node's entries do not fit.
func kept(outcome string) bool {
	switch outcome {
	case string(workerresult.Removed), string(workerresult.Refused), string(workerresult.Failed), string(workerresult.Invalid):
		return false
	}
	return true
}
