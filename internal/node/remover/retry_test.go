package remover

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestRetryRefusedForRoom: a removal a full disk refused is issued once
// more when others of the run freed room, re-checked first; nothing else is
// retried.
func TestRetryRefusedForRoom(t *testing.T) {
	// What containerd 1.6 answered on a full disk, where half of four
	// removals issued together were refused and the other half went through.
	full := errors.New(`rpc error: code = Unknown desc = failed to delete image reference "example.com/full/0:1": write /var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db: no space left on device: unknown`)
	cases := map[string]struct {
		refuseOnce, refuse map[string]error
		// startsBeforeRetry is a container that starts from an image
		// between the first attempt and the retry.
		startsBeforeRetry *cri.Container
		want              []outcome
		wantAttempts      map[string]int
	}{
		"refused on a full disk while others went through": {
			refuseOnce:   map[string]error{id('a'): full, id('b'): full},
			want:         []outcome{{id('9'), id('9'), workerresult.Removed}, {id('a'), id('a'), workerresult.Removed}, {id('b'), id('b'), workerresult.Removed}, {id('c'), id('c'), workerresult.Removed}},
			wantAttempts: map[string]int{id('9'): 1, id('a'): 2, id('b'): 2, id('c'): 1},
		},
		"every removal refused: nothing freed room": {
			refuse:       map[string]error{id('9'): full, id('a'): full, id('b'): full, id('c'): full},
			want:         []outcome{{id('9'), id('9'), workerresult.Failed}, {id('a'), id('a'), workerresult.Failed}, {id('b'), id('b'), workerresult.Failed}, {id('c'), id('c'), workerresult.Failed}},
			wantAttempts: map[string]int{id('9'): 1, id('a'): 1, id('b'): 1, id('c'): 1},
		},
		"refused again": {
			refuse:       map[string]error{id('a'): full},
			want:         []outcome{{id('9'), id('9'), workerresult.Removed}, {id('a'), id('a'), workerresult.Failed}, {id('b'), id('b'), workerresult.Removed}, {id('c'), id('c'), workerresult.Removed}},
			wantAttempts: map[string]int{id('9'): 1, id('a'): 2, id('b'): 1, id('c'): 1},
		},
		"another failure is not retried": {
			refuseOnce:   map[string]error{id('a'): errors.New("rpc error: code = Unknown desc = disk on fire")},
			want:         []outcome{{id('9'), id('9'), workerresult.Removed}, {id('a'), id('a'), workerresult.Failed}, {id('b'), id('b'), workerresult.Removed}, {id('c'), id('c'), workerresult.Removed}},
			wantAttempts: map[string]int{id('9'): 1, id('a'): 1, id('b'): 1, id('c'): 1},
		},
		"used by a container started before the retry": {
			refuseOnce:        map[string]error{id('a'): full},
			startsBeforeRetry: &cri.Container{Name: "late", State: "CONTAINER_RUNNING", ImageRef: id('a')},
			want:              []outcome{{id('9'), id('9'), workerresult.Removed}, {id('a'), id('a'), workerresult.InUse}, {id('b'), id('b'), workerresult.Removed}, {id('c'), id('c'), workerresult.Removed}},
			wantAttempts:      map[string]int{id('9'): 1, id('b'): 1, id('c'): 1, id('a'): 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &fakeRuntime{images: node, sandbox: "registry.k8s.io/pause:3.10", refuseOnce: tc.refuseOnce, removeErr: tc.refuse}
			if c := tc.startsBeforeRetry; c != nil {
				// Listings: the node read, the first attempt's re-check,
				// the judgement after it; the retry's re-check is the fourth.
				rt.onList = func(n int, f *fakeRuntime) {
					if n == 3 {
						f.mu.Lock()
						f.containers = append(f.containers, *c)
						f.mu.Unlock()
					}
				}
			}
			results, err := Run(context.Background(), rt, mustTargets(t, "*"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []outcome
			for _, o := range outcomes(results) {
				if o.Outcome != workerresult.Pinned {
					got = append(got, o)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAttempts, rt.attempts, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("removals issued per image (-want +got):\n%s", diff)
			}
		})
	}
}
