package remover

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
		want  Outcome
	}{
		"removed and gone":                           {after: presenceGone, want: Removed},
		"removed, listing failed":                    {after: presenceUnknown, want: Removed},
		"answered removed, still listed":             {after: presenceListed, want: Refused},
		"answered removed, pulled again, used":       {after: presenceListed, inUse: true, want: InUse},
		"timed out but gone":                         {err: wrapped(codes.DeadlineExceeded), after: presenceGone, want: Removed},
		"refused, a container started from it":       {err: wrapped(codes.Unknown), after: presenceListed, inUse: true, want: InUse},
		"failed precondition":                        {err: wrapped(codes.FailedPrecondition), after: presenceListed, want: Refused},
		"invalid argument":                           {err: wrapped(codes.InvalidArgument), after: presenceListed, want: Refused},
		"permission denied":                          {err: wrapped(codes.PermissionDenied), after: presenceListed, want: Refused},
		"unimplemented":                              {err: wrapped(codes.Unimplemented), after: presenceListed, want: Refused},
		"out of range":                               {err: wrapped(codes.OutOfRange), after: presenceListed, want: Refused},
		"already exists":                             {err: wrapped(codes.AlreadyExists), after: presenceListed, want: Refused},
		"permanent, listing failed":                  {err: wrapped(codes.FailedPrecondition), after: presenceUnknown, want: Refused},
		"unavailable":                                {err: wrapped(codes.Unavailable), after: presenceListed, want: Failed},
		"unavailable, listing failed":                {err: wrapped(codes.Unavailable), after: presenceUnknown, want: Failed},
		"deadline exceeded":                          {err: wrapped(codes.DeadlineExceeded), after: presenceListed, want: Failed},
		"canceled":                                   {err: wrapped(codes.Canceled), after: presenceListed, want: Failed},
		"resource exhausted":                         {err: wrapped(codes.ResourceExhausted), after: presenceListed, want: Failed},
		"aborted":                                    {err: wrapped(codes.Aborted), after: presenceListed, want: Failed},
		"internal":                                   {err: wrapped(codes.Internal), after: presenceListed, want: Failed},
		"unknown (containerd's and CRI-O's default)": {err: wrapped(codes.Unknown), after: presenceListed, want: Failed},
		"not a gRPC status (a broken stream)":        {err: errors.New("removing image sha256:abc: transport is closing"), after: presenceListed, want: Failed},
	}
	got, want := map[string]Outcome{}, map[string]Outcome{}
	for name, tc := range cases {
		outcome, detail := judgeRemoval(tc.err, tc.after, tc.inUse)
		got[name], want[name] = outcome, tc.want
		if outcome != Removed && detail == "" {
			t.Errorf("%s: %s without a detail", name, outcome)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}
