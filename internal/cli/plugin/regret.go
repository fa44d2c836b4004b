package plugin

// The space line of kubectl eraser status: what the runs freed, and what
// came back after earlier removals.

import (
	"fmt"
	"io"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
)

// Space is what the ImageJobs still kept in the cluster freed, and what
// came back to their nodes after earlier removals.
type Space struct {
	// Jobs counts the jobs that reported results.
	Jobs int `json:"jobs"`
	// BytesFreed is the size of the images their removals took, as the
	// runtimes reported it (dry runs left out); BytesReturned the size of
	// those that came back, counted alike, over Returns images.
	BytesFreed    int64 `json:"bytesFreed"`
	BytesReturned int64 `json:"bytesReturned"`
	Returns       int64 `json:"returns"`
	// RegretRate is BytesReturned over BytesFreed; absent when nothing
	// was freed.
	RegretRate *float64 `json:"regretRate,omitempty"`
}

// space totals the jobs' results. Returns count in a dry run too: the
// images came back after real removals of earlier runs.
func space(jobs []eraserv1.ImageJob) *Space {
	s := &Space{}
	for _, j := range jobs {
		r := j.Status.Results
		if r == nil {
			continue
		}
		s.Jobs++
		if !r.DryRun {
			s.BytesFreed += r.BytesFreed
		}
		if g := r.Regret; g != nil {
			s.BytesReturned += g.BytesReturned
			s.Returns += g.Returns
		}
	}
	if s.Jobs == 0 {
		return nil
	}
	if s.BytesFreed > 0 {
		rate := float64(s.BytesReturned) / float64(s.BytesFreed)
		s.RegretRate = &rate
	}
	return s
}

func printSpace(w io.Writer, s *Space) {
	if s == nil {
		return
	}
	line := fmt.Sprintf("Space (the %d runs kept in the cluster): freed %s", s.Jobs, bytesize.FormatSigned(s.BytesFreed))
	switch {
	case s.Returns == 0:
		line += "; nothing came back after a removal"
	case s.RegretRate != nil:
		line += fmt.Sprintf("; came back %s (%d images): regret rate %.1f%%", bytesize.FormatSigned(s.BytesReturned), s.Returns, 100**s.RegretRate)
	default:
		line += fmt.Sprintf("; came back %s (%d images) of earlier runs' removals", bytesize.FormatSigned(s.BytesReturned), s.Returns)
	}
	fmt.Fprintln(w, line)
}
