package remover

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestJudgeRemoval: the node's state after the removals wins over the
// runtime's answer; of the answers, only the codes that gRPC says a retry
// does not change make an image Refused, and everything else that leaves
// it on the node fails it.
func TestJudgeRemoval(t *testing.T) {
	wrapped := func(c codes.Code) error {
		return fmt.Errorf("removing image sha256:abc: %w", status.Error(c, c.String()))
	}
	cases := map[string]struct {
		err   error
		after presence
		inUse bool
		want  workerresult.Outcome
	}{
		"removed and gone":                           {after: presenceGone, want: workerresult.Removed},
		"removed, listing failed":                    {after: presenceUnknown, want: workerresult.Removed},
		"answered removed, still listed":             {after: presenceListed, want: workerresult.Refused},
		"answered removed, pulled again, used":       {after: presenceListed, inUse: true, want: workerresult.InUse},
		"timed out but gone":                         {err: wrapped(codes.DeadlineExceeded), after: presenceGone, want: workerresult.Removed},
		"refused, a container started from it":       {err: wrapped(codes.Unknown), after: presenceListed, inUse: true, want: workerresult.InUse},
		"failed precondition":                        {err: wrapped(codes.FailedPrecondition), after: presenceListed, want: workerresult.Refused},
		"invalid argument":                           {err: wrapped(codes.InvalidArgument), after: presenceListed, want: workerresult.Refused},
		"permission denied":                          {err: wrapped(codes.PermissionDenied), after: presenceListed, want: workerresult.Refused},
		"unimplemented":                              {err: wrapped(codes.Unimplemented), after: presenceListed, want: workerresult.Refused},
		"out of range":                               {err: wrapped(codes.OutOfRange), after: presenceListed, want: workerresult.Refused},
		"already exists":                             {err: wrapped(codes.AlreadyExists), after: presenceListed, want: workerresult.Refused},
		"permanent, listing failed":                  {err: wrapped(codes.FailedPrecondition), after: presenceUnknown, want: workerresult.Refused},
		"unavailable":                                {err: wrapped(codes.Unavailable), after: presenceListed, want: workerresult.Failed},
		"unavailable, listing failed":                {err: wrapped(codes.Unavailable), after: presenceUnknown, want: workerresult.Failed},
		"deadline exceeded":                          {err: wrapped(codes.DeadlineExceeded), after: presenceListed, want: workerresult.Failed},
		"canceled":                                   {err: wrapped(codes.Canceled), after: presenceListed, want: workerresult.Failed},
		"resource exhausted":                         {err: wrapped(codes.ResourceExhausted), after: presenceListed, want: workerresult.Failed},
		"aborted":                                    {err: wrapped(codes.Aborted), after: presenceListed, want: workerresult.Failed},
		"internal":                                   {err: wrapped(codes.Internal), after: presenceListed, want: workerresult.Failed},
		"unknown (containerd's and CRI-O's default)": {err: wrapped(codes.Unknown), after: presenceListed, want: workerresult.Failed},
		"not a gRPC status (a broken stream)":        {err: errors.New("removing image sha256:abc: transport is closing"), after: presenceListed, want: workerresult.Failed},
	}
	got, want := map[string]workerresult.Outcome{}, map[string]workerresult.Outcome{}
	for name, tc := range cases {
		outcome, detail := judgeRemoval(tc.err, tc.after, tc.inUse)
		got[name], want[name] = outcome, tc.want
		if outcome != workerresult.Removed && detail == "" {
			t.Errorf("%s: %s without a detail", name, outcome)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}
