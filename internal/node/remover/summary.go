package remover

import (
	"context"
	"log/slog"

	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/process/logging"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func logResult(log *slog.Logger, r Result, dryRun bool) {
	attrs := []any{"outcome", string(r.Outcome), "target", r.Target}
	if r.ImageID != "" {
		attrs = append(attrs, "image", r.ImageID, "names", r.Names)
	}
	if r.Policy != "" {
		attrs = append(attrs, "policy", string(r.Policy))
	}
	if r.Outcome == workerresult.Removed {
		attrs = append(attrs, "bytes", r.Bytes)
	}
	if r.Detail != "" {
		attrs = append(attrs, "detail", r.Detail)
	}
	if dryRun {
		attrs = append(attrs, "dryRun", true)
	}
	level := slog.LevelInfo
	if r.Outcome == workerresult.Failed || r.Outcome == workerresult.Invalid {
		level = slog.LevelError
	}
	log.Log(context.Background(), level, logging.ResultMessage, attrs...)
}

// NodeOutcome decides whether the node failed: it did when any removal it
// was asked for failed in a way a later run can get past (a runtime outage,
// a timeout; see judgeRemoval). Images kept because they are in use, pinned
// (the sandbox image included), excluded or not on the node are not
// failures, nor is an image that was already gone when removed (the CRI
// client reports NotFound as success), nor one the runtime refused for good
// (Refused: counted and named in the summary, a failure on every run
// otherwise). Invalid ImageList entries are counted, not failed: nothing is
// removed for them and the manager totals them with failures.
func NodeOutcome(s workerresult.Summary) error {
	failed := s.Count(workerresult.Failed)
	if failed == 0 {
		return nil
	}
	first := "(not recorded)"
	for _, f := range s.Failures {
		if !f.Invalid {
			first = f.Image + ": " + f.Message
			break
		}
	}
	return &worker.NodeFailedError{Failed: failed, Attempted: failed + s.Count(workerresult.Removed) + s.Count(workerresult.Refused), First: first}
}

// Summarize counts the results.
func Summarize(results []Result, dryRun bool) workerresult.Summary {
	s := workerresult.Summary{Component: "remover", DryRun: dryRun, Counts: map[string]int{}}
	for _, r := range results {
		s.Counts[string(r.Outcome)]++
		switch r.Outcome {
		case workerresult.Removed:
			s.BytesFreed += r.Bytes
			if r.Policy != "" {
				if s.RemovedBy == nil {
					s.RemovedBy = map[string]workerresult.PolicyTotal{}
				}
				t := s.RemovedBy[string(r.Policy)]
				t.Images++
				t.Bytes += r.Bytes
				s.RemovedBy[string(r.Policy)] = t
			}
		case workerresult.Failed:
			s.AddFailure(r.Target, r.Detail)
		case workerresult.Refused:
			s.AddRefused(r.Target, r.Detail)
		case workerresult.Invalid:
			s.AddInvalid(r.Target, r.Detail)
		}
	}
	return s
}
