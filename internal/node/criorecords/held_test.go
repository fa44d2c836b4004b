package criorecords_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

func TestExclusive(t *testing.T) {
	// A node: images a and c share a's layers (c is built on a); b has a
	// mapped copy of its top layer; a container runs a; d's top layer
	// record is gone.
	node := criorecords.Records{
		Images: []criorecords.Image{
			{ID: "a", TopLayer: "l-a", BigDataBytes: 1},
			{ID: "b", TopLayer: "l-b", MappedTopLayers: []string{"l-b-mapped"}, BigDataBytes: 2},
			{ID: "c", TopLayer: "l-c", BigDataBytes: 4},
			{ID: "d", TopLayer: "l-gone", BigDataBytes: 8},
		},
		Layers: []criorecords.Layer{
			{ID: "l-base", DiffBytes: 100},
			{ID: "l-a", Parent: "l-base", DiffBytes: 10},
			{ID: "l-b", Parent: "l-base", DiffBytes: 20},
			{ID: "l-b-mapped", Parent: "l-base", DiffBytes: 20},
			{ID: "l-c", Parent: "l-a", DiffBytes: 40},
			{ID: "rw-k", Parent: "l-a"},
			{ID: "l-stray", DiffBytes: 1000},
		},
		Containers: []criorecords.Container{{ID: "k", Image: "a", Layer: "rw-k"}},
	}
	// Two images on one base layer, no container.
	pair := criorecords.Records{
		Images: []criorecords.Image{{ID: "x", TopLayer: "l-x"}, {ID: "y", TopLayer: "l-y"}},
		Layers: []criorecords.Layer{{ID: "l-base", DiffBytes: 100}, {ID: "l-x", Parent: "l-base", DiffBytes: 1}, {ID: "l-y", Parent: "l-base", DiffBytes: 2}},
	}
	// Damaged records: parents in a loop.
	loop := criorecords.Records{
		Images: []criorecords.Image{{ID: "i", TopLayer: "p"}},
		Layers: []criorecords.Layer{{ID: "p", Parent: "q", DiffBytes: 1}, {ID: "q", Parent: "p", DiffBytes: 2}},
	}
	got := map[string]int64{}
	for name, tc := range map[string]struct {
		records criorecords.Records
		ids     []string
	}{
		"a container's image: nothing":                   {node, []string{"a"}},
		"the mapped copy of the top layer too":           {node, []string{"b"}},
		"only the layer another image does not stand on": {node, []string{"c"}},
		"two images": {node, []string{"b", "c"}},
		"a top layer without a record: the documents alone": {node, []string{"d"}},
		"none":                          {node, nil},
		"unknown":                       {node, []string{"nope"}},
		"one of two on a base":          {pair, []string{"x"}},
		"both on a base: the base once": {pair, []string{"x", "y", "x"}},
		"parents in a loop":             {loop, []string{"i"}},
	} {
		got[name] = criorecords.Exclusive(tc.records, tc.ids)
	}
	want := map[string]int64{
		"a container's image: nothing":                   0,
		"the mapped copy of the top layer too":           20 + 20 + 2,
		"only the layer another image does not stand on": 40 + 4,
		"two images": 20 + 20 + 2 + 40 + 4,
		"a top layer without a record: the documents alone": 8,
		"none":                          0,
		"unknown":                       0,
		"one of two on a base":          1,
		"both on a base: the base once": 1 + 2 + 100,
		"parents in a loop":             1 + 2,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exclusive bytes (-want +got):\n%s", diff)
	}
}

// TestHeldBy: what is held, and by whom; a stray layer is held by none.
func TestHeldBy(t *testing.T) {
	r := criorecords.Records{
		Images:     []criorecords.Image{{ID: "a", TopLayer: "l-a"}, {ID: "b", TopLayer: "l-b"}},
		Layers:     []criorecords.Layer{{ID: "l-a"}, {ID: "l-b", Parent: "l-a"}, {ID: "rw", Parent: "l-b"}, {ID: "stray"}},
		Containers: []criorecords.Container{{ID: "k", Image: "b", Layer: "rw"}},
	}
	set := func(ids ...string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	got := map[string]criorecords.Held{
		"all":            criorecords.HeldBy(r, nil, nil),
		"but b":          criorecords.HeldBy(r, set("b"), nil),
		"but k":          criorecords.HeldBy(r, nil, set("k")),
		"but b and k":    criorecords.HeldBy(r, set("b"), set("k")),
		"only k":         criorecords.HeldBy(r, nil, nil).Minus(criorecords.HeldBy(r, nil, set("k"))),
		"but a, b and k": criorecords.HeldBy(r, set("a", "b"), set("k")),
	}
	want := map[string]criorecords.Held{
		"all":            {Images: set("a", "b"), Layers: set("l-a", "l-b", "rw")},
		"but b":          {Images: set("a", "b"), Layers: set("l-a", "l-b", "rw")},
		"but k":          {Images: set("a", "b"), Layers: set("l-a", "l-b")},
		"but b and k":    {Images: set("a"), Layers: set("l-a")},
		"only k":         {Images: set(), Layers: set("rw")},
		"but a, b and k": {Images: set(), Layers: set()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
}
