package remover

import (
	"context"
	"log/slog"

	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func logResult(log *slog.Logger, r Result, dryRun bool) {
	line := nodereport.Line{Outcome: string(r.Outcome), Target: r.Target, Image: r.ImageID, Names: r.Names, Policy: string(r.Policy),
		Bytes: r.Bytes, BytesKnown: r.Outcome == workerresult.Removed, Detail: r.Detail, DryRun: dryRun}
	level := slog.LevelInfo
	if r.Outcome == workerresult.Failed || r.Outcome == workerresult.Invalid {
		level = slog.LevelError
	}
	line.Log(context.Background(), log, level)
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
