package reportcmd

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestPrint(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		out  Output
		want string
	}{
		"a halted run": {
			out: Output{Job: "j", Phase: "Failed", Complete: true, Nodes: halted},
			want: `ImageJob j: Failed, report complete, 6 nodes: 1 succeeded, 1 failed, 3 not started, 1 skipped
NODE  OUTCOME        IMAGE                         POLICY                 SIZE  DETAIL
n1    removed        docker.io/library/nginx:1.25  Listed                       
n2    (node failed)                                PodFailed                    container remover exited with code 1
n2    (no entries)                                                              no pod left to read
n3    (not started)                                Waiting                      the run ended while this node waited for its worker pod
n4    (not started)                                WaitTimedOut                 the run gave up waiting
n5    (not started)                                FailureBudgetExceeded        the run ended before it reached this node
s1    (skipped)                                    NotReady                     the job left this node out
`,
		},
		"an old report's NotStarted, and a note": {
			out: Output{Job: "j", Phase: "Failed", Complete: true, Note: "the run of generation 2 was deleted",
				Nodes: []nodereport.Node{{Name: "a", Reason: "NotStarted", Message: "the run ended before it reached this node"}}},
			want: `ImageJob j: Failed, report complete, 1 nodes: 1 not started
note: the run of generation 2 was deleted
NODE  OUTCOME        IMAGE  POLICY      SIZE  DETAIL
a     (not started)         NotStarted        the run ended before it reached this node
`,
		},
		"space freed, and a node that freed less": {
			out: Output{Job: "j", Phase: "Completed", Complete: true, Nodes: []nodereport.Node{
				{Name: "a", Freed: &workerresult.Freed{ExpectedBytes: 100 << 20, MeasuredBytes: 98 << 20, MeasuredBy: "imagefs"}},
				{Name: "b", Freed: &workerresult.Freed{ExpectedBytes: 50 << 20, MeasuredBytes: 2 << 20, MeasuredBy: "runtime", Note: "freed 2.0MiB of the 50.0MiB expected: the runtime still holds 48.0MiB of the removed images"}},
			}},
			want: `ImageJob j: Completed, report complete, 2 nodes: 2 succeeded
space freed: 100.0MiB (measured on 2 nodes); 150.0MiB expected (the removed images' own content)
  b: freed 2.0MiB of the 50.0MiB expected: the runtime still holds 48.0MiB of the removed images
NODE  OUTCOME  IMAGE  POLICY  SIZE  DETAIL
`,
		},
		"space a dry run would free: what the removed images hold": {
			out: Output{Job: "j", Phase: "Completed", Complete: true, Nodes: []nodereport.Node{
				{Name: "a", DryRun: true, BytesFreed: 9 << 20, Freed: &workerresult.Freed{ExpectedBytes: 4 << 20}},
			}},
			want: `ImageJob j: Completed, report complete, 1 nodes: 1 succeeded
space a removal would free: 4.0MiB (expected on 1 nodes: the removed images' own content)
NODE  OUTCOME  IMAGE  POLICY  SIZE  DETAIL
`,
		},
		"images that came back after earlier removals": {
			out: Output{Job: "j", Phase: "Completed", Complete: true, Nodes: []nodereport.Node{
				{Name: "a", Regret: &workerresult.Regret{Returns: 2, BytesReturned: 3 << 20, Recent: []workerresult.RegretReturn{
					{Image: "sha256:1", Repository: "example.com/app", Bytes: 2 << 20, Policy: "UnusedFor", Run: "sched-1", RemovedAt: t0, ReturnedAt: t0.Add(90 * time.Minute)},
					{Image: "sha256:2", Bytes: 1 << 20, Policy: "Listed", RemovedAt: t0, ReturnedAt: t0.Add(time.Minute)},
				}}},
				{Name: "b"},
			}},
			want: `ImageJob j: Completed, report complete, 2 nodes: 2 succeeded
came back after earlier removals: 2 images, 3.0MiB pulled again
  a: example.com/app (2.0MiB) removed by sched-1 (UnusedFor) at 2026-11-01T00:00:00Z, back 1h30m0s later
  a: sha256:2 (1.0MiB) removed by eraser node prune (Listed) at 2026-11-01T00:00:00Z, back 1m0s later
NODE  OUTCOME  IMAGE  POLICY  SIZE  DETAIL
`,
		},
		"the registries' answers": {
			out: Output{Job: "j", Phase: "Completed", Complete: true, Nodes: []nodereport.Node{
				{Name: "a", RegistryChecks: &workerresult.RegistryChecks{Counts: map[string]int{"present": 2, "gone": 1}, Requests: 2, Cached: 1, First: []workerresult.RegistryCheck{
					{Image: "sha256:1", Answer: "present", Detail: "r.example: 200"},
					{Image: "sha256:2", Answer: "gone", Detail: "r.example: 404 not found"},
				}}},
				{Name: "b", RegistryChecks: &workerresult.RegistryChecks{Counts: map[string]int{"unknown": 1}, Requests: 1, Error: "the registries' credentials could not be read, asked anonymously",
					First: []workerresult.RegistryCheck{{Image: "sha256:3", Answer: "unknown", Detail: "r.example: timeout"}}}},
			}},
			want: `ImageJob j: Completed, report complete, 2 nodes: 2 succeeded
registry checks: 2 present, 1 gone, 1 unknown (3 requests, 1 answers cached)
  a: sha256:2: gone (r.example: 404 not found)
  b: sha256:3: unknown (r.example: timeout)
  b: the registries' credentials could not be read, asked anonymously
NODE  OUTCOME  IMAGE  POLICY  SIZE  DETAIL
`,
		},
		"a node without the runtime's records counts the images' sizes": {
			out: Output{Job: "j", Phase: "Completed", Complete: true, Nodes: []nodereport.Node{
				{Name: "a", BytesFreed: 3 << 20, Freed: &workerresult.Freed{ExpectedBytes: 2 << 20, MeasuredBytes: 2 << 20, MeasuredBy: "imagefs"}},
				{Name: "w", BytesFreed: 1 << 20},
			}},
			want: `ImageJob j: Completed, report complete, 2 nodes: 2 succeeded
space freed: 3.0MiB (measured on 1 of 2 nodes, estimated on the others); 2.0MiB expected on 1 nodes (the removed images' own content)
NODE  OUTCOME  IMAGE  POLICY  SIZE  DETAIL
`,
		},
		"disk pressure: the nodes brought below their target, and one that was not": {
			out: Output{Job: "j", Phase: "Completed", Complete: true, Nodes: []nodereport.Node{
				{Name: "a", ImageFs: &workerresult.ImageFs{CapacityBytes: 100 << 20, UsedBeforeBytes: 90 << 20, UsedAfterBytes: 79 << 20, TargetBytes: 80 << 20, TargetReached: true, TimeToTargetMs: 1500, FreedToTargetBytes: 11 << 20}},
				{Name: "b", ImageFs: &workerresult.ImageFs{CapacityBytes: 100 << 20, UsedBeforeBytes: 95 << 20, UsedAfterBytes: 79 << 20, TargetBytes: 80 << 20, TargetReached: true, TimeToTargetMs: 250, FreedToTargetBytes: 16 << 20}},
				{Name: "c", ImageFs: &workerresult.ImageFs{CapacityBytes: 100 << 20, UsedBeforeBytes: 95 << 20, UsedAfterBytes: 85 << 20, TargetBytes: 80 << 20}},
				{Name: "d", ImageFs: &workerresult.ImageFs{CapacityBytes: 100 << 20, UsedBeforeBytes: 50 << 20, UsedAfterBytes: 50 << 20}},
			}},
			want: `ImageJob j: Completed, report complete, 4 nodes: 4 succeeded
disk pressure: 2 of 3 nodes under pressure brought below their target, the slowest 1.5s after its first removal for it
  c: disk pressure: still at or above the target 80.0MiB (80.0% of 100.0MiB), 85.0% used
NODE  OUTCOME  IMAGE  POLICY  SIZE  DETAIL
`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			Print(&b, tc.out)
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("printed (-want +got):\n%s", diff)
			}
		})
	}
}
