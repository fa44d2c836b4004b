package leftover

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// TestCRIO: each kind of CRI-O leftover is found with the bytes only it
// holds; what live images and containers hold, what a pull in progress is
// writing, a container being made and the containers of other users of
// the store are none. Layers without a size are measured, and only those.
func TestCRIO(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	const mib = 1 << 20
	old, recent := now.Add(-48*time.Hour), now.Add(-time.Minute)
	r := criorecords.Records{
		Driver: "overlay",
		Images: []criorecords.Image{
			{ID: "i-app", Names: []string{"example.com/app:1"}, TopLayer: "l-app", BigDataBytes: 3 << 10},
			{ID: "i-old", Names: []string{"example.com/old:1"}, TopLayer: "l-old", BigDataBytes: 1 << 10},
		},
		Layers: []criorecords.Layer{
			{ID: "l-base", DiffBytes: 20 * mib, Created: old},
			{ID: "l-app", Parent: "l-base", DiffBytes: 5 * mib, Created: old},
			{ID: "l-old", Parent: "l-base", DiffBytes: 2 * mib, Created: old},
			{ID: "rw-live", Parent: "l-app", Created: old},
			// A removal cut short: two layers of a chain no image holds.
			{ID: "l-cut", Parent: "l-base", DiffBytes: 4 * mib, Created: old},
			{ID: "l-cut-top", Parent: "l-cut", DiffBytes: 2 * mib, Created: old},
			// An interrupted pull of two days ago: no size recorded.
			{ID: "l-interrupted", Incomplete: true, Created: old},
			// Orphans' layers: one on an image still there, one on an image
			// removed from under its container (whose top layer only the
			// container holds now).
			{ID: "rw-gone", Parent: "l-old", Created: old},
			{ID: "l-forced", Parent: "l-base", DiffBytes: 8 * mib, Created: old},
			{ID: "rw-forced", Parent: "l-forced", Created: old},
			{ID: "rw-sandbox", Parent: "l-app", Created: old},
			{ID: "rw-podman", Parent: "l-app", Created: old},
			{ID: "rw-creating", Parent: "l-app", Created: recent},
		},
		Containers: []criorecords.Container{
			{ID: "c-live", Image: "i-app", Layer: "rw-live", Names: []string{"k8s_app_pod_ns_uid_0"}, PodID: "s-pod", Created: old},
			{ID: "s-pod", Image: "i-app", Layer: "rw-sandbox", Names: []string{"k8s_POD_pod_ns_uid_0"}, PodID: "s-pod", Created: old},
			{ID: "c-gone", Image: "i-old", Layer: "rw-gone", Names: []string{"k8s_old_gone_ns_uid_3"}, PodID: "s-gone", Created: old},
			{ID: "c-forced", Image: "i-removed", Layer: "rw-forced", PodID: "s-forced", Created: old},
			{ID: "c-podman", Image: "i-app", Layer: "rw-podman", Names: []string{"web"}, Created: old},
			{ID: "c-creating", Image: "i-app", Layer: "rw-creating", PodID: "s-new", Created: recent},
		},
	}
	disk := map[string]int64{"l-interrupted": 3 * mib, "rw-gone": 7 * mib, "rw-forced": 1 * mib, "rw-live": 50 * mib}
	var measured []string
	o := CRIOOptions{
		Live:   map[string]bool{"c-live": true, "s-pod": true},
		SizeOf: func(id string) int64 { measured = append(measured, id); return disk[id] },
		MinAge: time.Hour,
		Now:    now,
	}
	found := CRIO(r, o)
	got := map[string]Leftover{}
	for _, l := range found {
		l.Why = strings.SplitN(l.Why, " ", 2)[0] // the reason's gist
		got[l.Name] = l
	}
	want := map[string]Leftover{
		"l-cut":                          {Kind: leftoverkind.UnreferencedLayer, Name: "l-cut", Bytes: 4 * mib, Why: "no"},
		"l-cut-top":                      {Kind: leftoverkind.UnreferencedLayer, Name: "l-cut-top", Bytes: 2 * mib, Why: "no"},
		"l-interrupted":                  {Kind: leftoverkind.IncompleteLayer, Name: "l-interrupted", Bytes: 3 * mib, Why: "flagged"},
		"c-gone (k8s_old_gone_ns_uid_3)": {Kind: leftoverkind.OrphanContainer, Name: "c-gone (k8s_old_gone_ns_uid_3)", Bytes: 7 * mib, Why: "storage"},
		"c-forced":                       {Kind: leftoverkind.OrphanContainer, Name: "c-forced", Bytes: 1*mib + 8*mib, Why: "storage"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var order []string
	for _, l := range found {
		order = append(order, l.Name)
	}
	if diff := cmp.Diff([]string{"c-forced", "c-gone (k8s_old_gone_ns_uid_3)", "l-cut", "l-interrupted", "l-cut-top"}, order); diff != "" {
		t.Errorf("order, largest first (-want +got):\n%s", diff)
	}
	slices.Sort(measured)
	if diff := cmp.Diff([]string{"l-interrupted", "rw-forced", "rw-gone"}, slices.Compact(measured)); diff != "" {
		t.Errorf("layers measured (-want +got):\n%s", diff)
	}

	t.Run("CRI not asked: no container judged", func(t *testing.T) {
		o := o
		o.Live = nil
		for _, l := range CRIO(r, o) {
			if l.Kind == leftoverkind.OrphanContainer {
				t.Errorf("without the live containers: %+v", l)
			}
		}
	})
	t.Run("no measure: layers by their records", func(t *testing.T) {
		o := o
		o.SizeOf = nil
		got := map[string]uint64{}
		for _, l := range CRIO(r, o) {
			got[l.Name] = l.Bytes
		}
		want := map[string]uint64{"l-cut": 4 * mib, "l-cut-top": 2 * mib, "l-interrupted": 0, "c-gone (k8s_old_gone_ns_uid_3)": 0, "c-forced": 8 * mib}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("nothing young: the container being made judged too", func(t *testing.T) {
		o := o
		o.MinAge = 0
		got := map[string]leftoverkind.Kind{}
		for _, l := range CRIO(r, o) {
			got[l.Name] = l.Kind
		}
		for name, kind := range map[string]leftoverkind.Kind{"c-creating": leftoverkind.OrphanContainer} {
			if got[name] != kind {
				t.Errorf("%s: %q, want %q", name, got[name], kind)
			}
		}
	})
}

// TestCRIOPullInProgress: while a layer a pull could have written is
// younger than the record age, no layer nothing holds is judged, on any
// chain: a slow pull's chain whose last layer landed long ago, and a layer
// a pull may reuse by its contents. A container's read-write layer is no
// pull's; incomplete layers and orphans are judged as before.
func TestCRIOPullInProgress(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	old, recent := now.Add(-48*time.Hour), now.Add(-time.Minute)
	base := criorecords.Records{
		Driver: "overlay",
		Images: []criorecords.Image{{ID: "i-app", TopLayer: "l-app"}},
		Layers: []criorecords.Layer{
			{ID: "l-app", DiffBytes: 1, Created: old},
			{ID: "rw-gone", Parent: "l-app", Created: old},
			// A slow pull's first layers, or a removal's leftover chain:
			// the records cannot tell them apart.
			{ID: "l-chain", DiffBytes: 1, Created: old},
			{ID: "l-chain-top", Parent: "l-chain", DiffBytes: 1, Created: old},
			{ID: "l-dead", Incomplete: true, Created: old},
		},
		Containers: []criorecords.Container{{ID: "c-gone", Image: "i-app", Layer: "rw-gone", PodID: "s-gone", Created: old}},
	}
	with := func(extra ...any) criorecords.Records {
		r := base
		r.Layers = slices.Clone(base.Layers)
		r.Containers = slices.Clone(base.Containers)
		for _, e := range extra {
			switch e := e.(type) {
			case criorecords.Layer:
				r.Layers = append(r.Layers, e)
			case criorecords.Container:
				r.Containers = append(r.Containers, e)
			}
		}
		return r
	}
	settled := []string{"c-gone", "l-chain", "l-chain-top", "l-dead"}
	for name, tc := range map[string]struct {
		records     criorecords.Records
		wantPulling bool
		want        []string
	}{
		"nothing written lately": {records: with(), want: settled},
		"another pull's layer landed a minute ago": {
			records:     with(criorecords.Layer{ID: "l-new", Created: recent}),
			wantPulling: true, want: []string{"c-gone", "l-dead"},
		},
		"a pull's layer being written": {
			records:     with(criorecords.Layer{ID: "l-writing", Parent: "l-chain-top", Incomplete: true, Created: recent}),
			wantPulling: true, want: []string{"c-gone", "l-dead"},
		},
		"a container made a minute ago": {
			records: with(criorecords.Layer{ID: "rw-new", Parent: "l-app", Created: recent},
				criorecords.Container{ID: "c-new", Image: "i-app", Layer: "rw-new", PodID: "s-new", Created: recent}),
			want: settled,
		},
		"a layer written just over the record age ago": {
			records: with(criorecords.Layer{ID: "l-hour", Created: now.Add(-time.Hour - time.Second)}),
			want:    append(slices.Clone(settled), "l-hour"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Pulling(tc.records, time.Hour, now) != ""; got != tc.wantPulling {
				t.Errorf("Pulling: %v, want %v", got, tc.wantPulling)
			}
			var got []string
			for _, l := range CRIO(tc.records, CRIOOptions{Live: map[string]bool{}, MinAge: time.Hour, Now: now}) {
				got = append(got, l.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("judged (-want +got):\n%s", diff)
			}
		})
	}
}
