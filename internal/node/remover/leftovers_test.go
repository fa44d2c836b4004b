package remover

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/wire/config"
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

// TestLeftoverDefaultsMatchConfig: what the configuration documents as
// the default is what a remover given no flag uses.
func TestLeftoverDefaultsMatchConfig(t *testing.T) {
	want := reclaim.Ages{Lease: config.DefaultLeaseAge, Record: config.DefaultRecordAge}
	if diff := cmp.Diff(want, reclaim.DefaultAges); diff != "" {
		t.Errorf("(-config +workers):\n%s", diff)
	}
}
