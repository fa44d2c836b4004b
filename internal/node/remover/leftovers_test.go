package remover

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestLeftoverFlagsAges: the margins the remover's flags set, as the
// manager passes them (podspec's leftoverArgs) and as a node's prune
// takes them.
func TestLeftoverFlagsAges(t *testing.T) {
	cases := map[string]struct {
		args []string
		want reclaim.Ages
		err  bool
	}{
		"defaults":           {want: reclaim.DefaultAges},
		"lease age":          {args: []string{"--lease-age=48h"}, want: reclaim.Ages{Lease: 48 * time.Hour, Record: reclaim.DefaultAges.Record}},
		"record age":         {args: []string{"--record-age=30m0s"}, want: reclaim.Ages{Lease: reclaim.DefaultAges.Lease, Record: 30 * time.Minute}},
		"both":               {args: []string{"--lease-age=2h", "--record-age=6h"}, want: reclaim.Ages{Lease: 2 * time.Hour, Record: 6 * time.Hour}},
		"not a duration":     {args: []string{"--record-age=an hour"}, err: true},
		"a misspelt flag":    {args: []string{"--records-age=1h"}, err: true},
		"record age of zero": {args: []string{"--record-age=0s"}, want: reclaim.Ages{Lease: reclaim.DefaultAges.Lease}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("remover", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var f LeftoverFlags
			f.Bind(fs)
			err := fs.Parse(c.args)
			if c.err {
				if err == nil {
					t.Fatalf("%v parsed", c.args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, f.Ages()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLeftoverFlagsLeaseAgeFloor: the remover reclaims old-lease only
// with a lease age the configuration would take; it lists with any, and
// a prune run by hand (no floor) reclaims with any.
func TestLeftoverFlagsLeaseAgeFloor(t *testing.T) {
	cases := map[string]struct {
		flags   LeftoverFlags
		wantErr bool
	}{
		"the default":                     {flags: LeftoverFlags{Find: true, Reclaim: "old-lease", LeaseAge: reclaim.DefaultAges.Lease, MinLeaseAge: workerdefaults.MinLeaseAge}},
		"the least":                       {flags: LeftoverFlags{Find: true, Reclaim: "old-lease", LeaseAge: workerdefaults.MinLeaseAge, MinLeaseAge: workerdefaults.MinLeaseAge}},
		"under it, reclaiming old-lease":  {flags: LeftoverFlags{Find: true, Reclaim: "unnamed-image,old-lease", LeaseAge: 0, MinLeaseAge: workerdefaults.MinLeaseAge}, wantErr: true},
		"under it, old-lease not claimed": {flags: LeftoverFlags{Find: true, Reclaim: "unnamed-image", LeaseAge: 0, MinLeaseAge: workerdefaults.MinLeaseAge}},
		"under it, by hand":               {flags: LeftoverFlags{Find: true, Reclaim: "old-lease", LeaseAge: 0}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.flags.Leftovers(nil, "", nil)
			if (err != nil) != c.wantErr {
				t.Errorf("error %v, want one: %v", err, c.wantErr)
			}
		})
	}
	var cmd Command
	cmd.Bind(flag.NewFlagSet("remover", flag.ContinueOnError))
	if cmd.Leftover.MinLeaseAge != workerdefaults.MinLeaseAge {
		t.Errorf("the remover's least lease age is %s, the configuration's %s", cmd.Leftover.MinLeaseAge, workerdefaults.MinLeaseAge)
	}
}

// TestTally: the leftovers' totals in the summary, and their result
// lines: the sweep of containerd's stores adds its bytes to those
// reclaimed but is not a leftover, and where what it freed is unknown its
// line carries no bytes and the summary says unknown rather than 0.
func TestTally(t *testing.T) {
	const mib = 1 << 20
	res := func(kind leftoverkind.Kind, name string, bytes uint64, o reclaim.Outcome) reclaim.Result {
		return reclaim.Result{Leftover: leftover.Leftover{Kind: kind, Namespace: reclaim.CRINamespace, Name: name, Bytes: bytes}, Outcome: o}
	}
	swept := res(leftoverkind.Unreferenced, reclaim.SweptStores, 6*mib, reclaim.Reclaimed)
	unknown := res(leftoverkind.Unreferenced, reclaim.SweptStores, 0, reclaim.Reclaimed)
	unknown.BytesUnknown = true
	cases := map[string]struct {
		results []reclaim.Result
		want    workerresult.Leftovers
		// lineBytes are the bytes of each result line, by target; absent:
		// the line has none.
		lineBytes map[string]float64
	}{
		"none": {lineBytes: map[string]float64{}},
		"found and reclaimed": {
			results:   []reclaim.Result{res(leftoverkind.UnnamedImage, "sha256:a", 3*mib, reclaim.Reclaimed), res(leftoverkind.GCRoot, "sha256:b", mib, reclaim.Found), res(leftoverkind.OldLease, "l", 2*mib, reclaim.Failed)},
			want:      workerresult.Leftovers{Reclaimed: 1, ReclaimedBytes: 3 * mib, Found: 2, FoundBytes: 3 * mib, Failed: 1},
			lineBytes: map[string]float64{"sha256:a": 3 * mib, "sha256:b": mib, "l": 2 * mib},
		},
		"the sweep measured": {
			results:   []reclaim.Result{res(leftoverkind.Unreferenced, "sha256:c", mib, reclaim.Reclaimed), swept},
			want:      workerresult.Leftovers{Reclaimed: 1, ReclaimedBytes: 7 * mib, SweptBytes: 6 * mib},
			lineBytes: map[string]float64{"sha256:c": mib, reclaim.SweptStores: 6 * mib},
		},
		"gone before its deletion": {
			results:   []reclaim.Result{res(leftoverkind.OldLease, "l", 0, reclaim.Gone), res(leftoverkind.UnnamedImage, "sha256:a", 3*mib, reclaim.Reclaimed)},
			want:      workerresult.Leftovers{Reclaimed: 1, ReclaimedBytes: 3 * mib},
			lineBytes: map[string]float64{"l": 0, "sha256:a": 3 * mib},
		},
		"the sweep unmeasured": {
			results:   []reclaim.Result{unknown},
			want:      workerresult.Leftovers{SweptUnknown: true},
			lineBytes: map[string]float64{},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			got := tally(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil)), c.results)
			if diff := cmp.Diff(c.want, *got); diff != "" {
				t.Errorf("totals (-want +got):\n%s", diff)
			}
			lines := map[string]float64{}
			for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
				if len(line) == 0 {
					continue
				}
				var l map[string]any
				if err := json.Unmarshal(line, &l); err != nil {
					t.Fatal(err)
				}
				if b, ok := l["bytes"].(float64); ok {
					lines[l["target"].(string)] = b
				}
			}
			if diff := cmp.Diff(c.lineBytes, lines); diff != "" {
				t.Errorf("result lines' bytes (-want +got):\n%s", diff)
			}
		})
	}
}
