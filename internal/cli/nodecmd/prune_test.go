package nodecmd

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
	id  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// TestPrintPrune is prune's table and the summary below it: the outcomes
// in their order, what was freed (or would be), by policy, the image
// filesystem, what the removals' content came to and what they left.
func TestPrintPrune(t *testing.T) {
	cases := map[string]struct {
		results []remover.Result
		summary workerresult.Summary
		took    time.Duration
		want    string
	}{
		"a list's removals": {
			results: []remover.Result{
				{Target: "docker.io/library/alpine:3.7.3", ImageID: id, Names: []string{"docker.io/library/alpine:3.7.3"}, Outcome: workerresult.Removed, Policy: retention.Listed, Bytes: 5 * mib},
				{Target: id, ImageID: id, Names: []string{"example.com/app:1", "example.com/app:latest"}, Outcome: workerresult.InUse, Bytes: 1536, Detail: "container web"},
				{Target: "not a ref!!", Outcome: workerresult.Invalid, Detail: "not an image reference"},
			},
			summary: workerresult.Summary{Counts: map[string]int{"removed": 1, "in use": 1, "invalid": 1}, BytesFreed: 5 * mib},
			took:    1234567 * time.Microsecond,
			want: `TARGET                          NAMES                                     OUTCOME  POLICY  SIZE    DETAIL
docker.io/library/alpine:3.7.3  docker.io/library/alpine:3.7.3            removed  Listed  5.0MiB  -
sha256:0123456789ab             example.com/app:1,example.com/app:latest  in use   -       1.5KiB  container web
not a ref!!                                                               invalid  -       0B      not an image reference

1 removed, 1 in use, 1 invalid; freed 5.0MiB in 1.235s
`,
		},
		"a dry run of the policies": {
			results: []remover.Result{
				{Target: id, ImageID: id, Names: []string{"example.com/old:1"}, Outcome: workerresult.Removed, Policy: retention.UnusedFor, Bytes: 2 * gib},
				{Target: "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", Outcome: workerresult.Removed, Policy: retention.DiskPressure, Bytes: 512 * mib},
			},
			summary: workerresult.Summary{DryRun: true, Counts: map[string]int{"removed": 2}, BytesFreed: 2*gib + 512*mib,
				RemovedBy: map[string]workerresult.PolicyTotal{"DiskPressure": {Images: 1, Bytes: 512 * mib}, "UnusedFor": {Images: 1, Bytes: 2 * gib}},
				ImageFs:   &workerresult.ImageFs{CapacityBytes: 10 * gib, UsedBeforeBytes: 9 * gib, UsedAfterBytes: 6*gib + 512*mib},
				Freed:     &workerresult.Freed{ExpectedBytes: 2 * gib},
				Leftovers: &workerresult.Leftovers{Found: 2, FoundBytes: mib, Reclaimed: 3, ReclaimedBytes: 3 * mib}},
			want: `TARGET               NAMES              OUTCOME  POLICY        SIZE      DETAIL
sha256:0123456789ab  example.com/old:1  removed  UnusedFor     2.0GiB    -
sha256:fedcba987654                     removed  DiskPressure  512.0MiB  -

2 removed; would free 2.5GiB in 0s
  UnusedFor: 1 images, 2.0GiB
  DiskPressure: 1 images, 512.0MiB
image filesystem: 90.0% used before, 65.0% after (of 10.0GiB)
the removed images' own content: 2.0GiB
leftovers of removals on the runtime: would reclaim 3 (3.0MiB), 2 left (1.0MiB; eraser node list --leftovers)
`,
		},
		"measured by the runtime's records, leftovers not looked for": {
			results: []remover.Result{{Target: "example.com/app:1", Outcome: workerresult.Refused, Bytes: kib, Detail: "image is in use by a stopped container"}},
			summary: workerresult.Summary{Counts: map[string]int{"refused": 1},
				Freed:     &workerresult.Freed{ExpectedBytes: 100 * mib, MeasuredBy: remover.MeasuredByRuntime, MeasuredBytes: -mib, Note: "a pull wrote to the store meanwhile"},
				Leftovers: &workerresult.Leftovers{Error: "reading the store: permission denied", SweptBytes: 4 * mib}},
			took: 20 * time.Millisecond,
			want: `TARGET             NAMES  OUTCOME  POLICY  SIZE    DETAIL
example.com/app:1         refused  -       1.0KiB  image is in use by a stopped container

1 refused; freed 0B in 20ms
the removed images' own content: 100.0MiB; the runtime's records gained -1.0MiB
  a pull wrote to the store meanwhile
leftovers not looked for: reading the store: permission denied
containerd's stores swept of what no record names: 4.0MiB freed
`,
		},
		"measured on the image filesystem, the sweep not": {
			results: []remover.Result{{Target: "example.com/app:1", Outcome: workerresult.Removed, Bytes: mib}},
			summary: workerresult.Summary{Counts: map[string]int{"removed": 1}, BytesFreed: mib,
				Freed:     &workerresult.Freed{ExpectedBytes: mib, MeasuredBy: "imagefs", MeasuredBytes: 2 * mib},
				Leftovers: &workerresult.Leftovers{SweptUnknown: true}},
			want: `TARGET             NAMES  OUTCOME  POLICY  SIZE    DETAIL
example.com/app:1         removed  -       1.0MiB  -

1 removed; freed 1.0MiB in 0s
the removed images' own content: 1.0MiB; the image filesystem gained 2.0MiB
containerd's stores swept of what no record names: what that freed is not known (the image filesystem could not be measured)
`,
		},
		"content not measured": {
			results: []remover.Result{{Target: "example.com/app:1", Outcome: workerresult.NotOnNode}},
			summary: workerresult.Summary{Counts: map[string]int{"not on node": 1},
				Freed: &workerresult.Freed{Error: "imagefs: statfs /var/lib/containerd: no such file or directory"}},
			want: `TARGET             NAMES  OUTCOME      POLICY  SIZE  DETAIL
example.com/app:1         not on node  -       0B    -

1 not on node; freed 0B in 0s
the removed images' own content: 0B
  not measured: imagefs: statfs /var/lib/containerd: no such file or directory
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printPrune(&out, tc.results, tc.summary, tc.took); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPruneOutput is "prune -o json": every result with its policy and
// detail, names never null, and the summary as the remover leaves it.
func TestPruneOutput(t *testing.T) {
	summary := workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 1, "invalid": 1}, BytesFreed: mib}
	cases := map[string]struct {
		results []remover.Result
		want    PruneOutput
	}{
		"none": {want: PruneOutput{Results: []PrunedImage{}, Summary: summary}},
		"removed and invalid": {
			results: []remover.Result{
				{Target: "example.com/app:1", ImageID: id, Names: []string{"example.com/app:1"}, Outcome: workerresult.Removed, Policy: retention.Listed, Bytes: mib},
				{Target: "not a ref!!", Outcome: workerresult.Invalid, Detail: "not an image reference"},
			},
			want: PruneOutput{Results: []PrunedImage{
				{Target: "example.com/app:1", ImageID: id, Names: []string{"example.com/app:1"}, Outcome: "removed", Policy: "Listed", Bytes: mib},
				{Target: "not a ref!!", Names: []string{}, Outcome: "invalid", Detail: "not an image reference"},
			}, Summary: summary},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, pruneOutput(tc.results, summary)); diff != "" {
				t.Errorf("pruneOutput (-want +got):\n%s", diff)
			}
		})
	}
}
