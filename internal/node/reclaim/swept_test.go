package reclaim

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// TestSweptStores: what the sweep of containerd's stores freed beyond the
// leftovers the same collection deleted, from the image filesystem's use
// before and after it; unknown, not 0, where the filesystem is not seen
// or cannot be read.
func TestSweptStores(t *testing.T) {
	const mib = 1 << 20
	seen := func(n uint64) used { return used{bytes: n, ok: true} }
	unref := func(name string, bytes uint64, o Outcome) Result {
		return Result{Leftover: leftover.Leftover{Kind: leftoverkind.Unreferenced, Namespace: CRINamespace, Name: name, Bytes: bytes}, Outcome: o}
	}
	type want struct {
		Bytes   uint64
		Unknown bool
		Emitted bool
	}
	cases := map[string]struct {
		before, after used
		results       []Result
		want          want
	}{
		"files no record names":                   {before: seen(100 * mib), after: seen(94 * mib), want: want{Bytes: 6 * mib, Emitted: true}},
		"less the leftovers listed and reclaimed": {before: seen(100 * mib), after: seen(90 * mib), results: []Result{unref("sha256:a", 3*mib, Reclaimed), unref("sha256:b", 1*mib, Reclaimed)}, want: want{Bytes: 6 * mib, Emitted: true}},
		"a leftover kept is not taken off":        {before: seen(100 * mib), after: seen(94 * mib), results: []Result{unref("sha256:a", 3*mib, Kept)}, want: want{Bytes: 6 * mib, Emitted: true}},
		"other kinds are not taken off": {before: seen(100 * mib), after: seen(94 * mib),
			results: []Result{{Leftover: leftover.Leftover{Kind: leftoverkind.UnnamedImage, Name: "sha256:c", Bytes: 5 * mib}, Outcome: Reclaimed}}, want: want{Bytes: 6 * mib, Emitted: true}},
		"nothing beyond the leftovers":  {before: seen(100 * mib), after: seen(96 * mib), results: []Result{unref("sha256:a", 5*mib, Reclaimed)}},
		"the filesystem grew meanwhile": {before: seen(100 * mib), after: seen(101 * mib)},
		"the filesystem is not seen":    {before: used{}, after: used{}, want: want{Unknown: true, Emitted: true}},
		"the reading before failed":     {before: used{err: errors.New("statfs: EIO")}, after: seen(1), want: want{Unknown: true, Emitted: true}},
		"the reading after failed":      {before: seen(100 * mib), after: used{err: errors.New("statfs: EIO")}, want: want{Unknown: true, Emitted: true}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r, ok := sweptStores(c.before, c.after, c.results)
			got := want{Bytes: r.Bytes, Unknown: r.BytesUnknown, Emitted: ok}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\ndetail: %s", diff, r.Detail)
			}
			if r.Name != SweptStores || r.Kind != leftoverkind.Unreferenced || r.Outcome != Reclaimed || r.Detail == "" {
				t.Errorf("result %+v", r)
			}
		})
	}
}
