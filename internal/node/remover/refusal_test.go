//go:build linux

package remover_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// refusingRuntime is the real runtime, except that the removal of chosen
// images is answered with an error instead of being sent: what a runtime
// that refuses them would answer.
type refusingRuntime struct {
	*cri.Client
	refuse map[string]error // image ID -> answer
}

func (r *refusingRuntime) StartRemovals(ctx context.Context, ids []string) func() []error {
	var send []string
	var at []int
	for i, id := range ids {
		if r.refuse[id] == nil {
			send, at = append(send, id), append(at, i)
		}
	}
	wait := r.Client.StartRemovals(ctx, send)
	return func() []error {
		errs := make([]error, len(ids))
		for i, id := range ids {
			if err := r.refuse[id]; err != nil {
				errs[i] = fmt.Errorf("removing image %s: %w", id, err)
			}
		}
		for k, err := range wait() {
			errs[at[k]] = err
		}
		return errs
	}
}

// TestRefusedRemovals: with a real containerd behind, an image whose
// removal the runtime refuses with a code a retry does not change is
// counted refused and named, and the node succeeds; one refused with a
// code that may pass on retry (the runtime unavailable) fails the node.
func TestRefusedRemovals(t *testing.T) {
	cases := map[string]struct {
		answer   error
		want     map[string]int
		wantExit int
	}{
		"failed precondition": {
			answer: status.Error(codes.FailedPrecondition, "image is locked"),
			want:   map[string]int{"removed": 2, "refused": 1}, wantExit: workerresult.ExitOK,
		},
		"permission denied": {
			answer: status.Error(codes.PermissionDenied, "read-only image store"),
			want:   map[string]int{"removed": 2, "refused": 1}, wantExit: workerresult.ExitOK,
		},
		"unavailable": {
			answer: status.Error(codes.Unavailable, "connection refused"),
			want:   map[string]int{"removed": 2, "failed": 1}, wantExit: workerresult.ExitNodeFailed,
		},
		"unknown": {
			answer: status.Error(codes.Unknown, "failed to delete image reference"),
			want:   map[string]int{"removed": 2, "failed": 1}, wantExit: workerresult.ExitNodeFailed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctrd := testcontainerd.Start(t)
			imgs, tags := junk(3)
			ctrd.Import(t, imgs...)
			stuck := ctrd.ImageIDs(t)[tags[1]]
			rt := &refusingRuntime{Client: ctrd.Client(t), refuse: map[string]error{stuck: tc.answer}}
			targets, _ := remover.ParseTargets(tags)
			results, err := remover.Run(context.Background(), rt, targets, remover.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := remover.Summarize(results, false)
			if diff := cmp.Diff(tc.want, s.Counts); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if code := worker.ExitCode(remover.NodeOutcome(s)); code != tc.wantExit {
				t.Errorf("exit code %d, want %d", code, tc.wantExit)
			}
			if tc.wantExit == workerresult.ExitOK {
				if len(s.Refused) != 1 || s.Refused[0].Image != tags[1] || !strings.Contains(s.Refused[0].Message, status.Code(tc.answer).String()) {
					t.Errorf("refused %+v, want %s with its code", s.Refused, tags[1])
				}
			}
			if _, ok := ctrd.ImageIDs(t)[tags[1]]; !ok {
				t.Errorf("%s is gone although its removal was refused", tags[1])
			}
		})
	}
}
