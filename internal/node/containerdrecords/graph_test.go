package containerdrecords

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGraphExclusive: what removing records frees, as containerd's
// garbage collector decides it: a blob another namespace's image holds is
// not freed with the kubelet's, a snapshot's parent goes with its last
// child, a lease holds what it names.
func TestGraphExclusive(t *testing.T) {
	img := func(name, manifest string) Image { return Image{Name: name, Target: manifest} }
	manifest := func(digest, config, layer string, size int64) Blob {
		return Blob{Digest: digest, Bytes: size, Labels: map[string]string{labelRefContent + "config": config, labelRefContent + "l.0": layer}}
	}
	config := func(digest, snapshot string) Blob {
		return Blob{Digest: digest, Bytes: 10, Labels: map[string]string{labelRefSnapshot + "overlayfs": snapshot}}
	}
	k8s := Namespace{Name: "k8s.io",
		Images:  []Image{img("a:1", "m-a"), img("b:1", "m-b")},
		Content: []Blob{manifest("m-a", "c-a", "l-base", 1), config("c-a", "s-a"), manifest("m-b", "c-b", "l-base", 1), config("c-b", "s-b"), {Digest: "l-base", Bytes: 1000}, {Digest: "l-stray", Bytes: 7}},
		Snapshots: []Snapshot{
			{Snapshotter: "overlayfs", Key: "s-base", Bytes: 2000},
			{Snapshotter: "overlayfs", Key: "s-a", Parent: "s-base", Bytes: 300},
			{Snapshotter: "overlayfs", Key: "s-b", Parent: "s-base", Bytes: 400},
		},
		Leases: []Lease{{ID: "pull", Resources: []Resource{{Type: "content", ID: "l-pulling"}}}},
	}
	k8s.Content = append(k8s.Content, Blob{Digest: "l-pulling", Bytes: 50})
	other := Namespace{Name: "default",
		Images:  []Image{img("a:1", "m-a")},
		Content: []Blob{manifest("m-a", "c-a", "l-base", 1), config("c-a", "s-a2"), {Digest: "l-base", Bytes: 1000}},
	}
	g := NewGraph(Records{Namespaces: []Namespace{k8s, other}})
	ref := func(kind RefKind, ns, id string) Ref { return Ref{Kind: kind, Namespace: ns, ID: id} }
	cases := map[string]struct {
		refs []Ref
		want uint64
	}{
		"nothing": {want: 0},
		"a: its snapshot; its blobs are default's too": {refs: []Ref{ref(ImageRef, "k8s.io", "a:1")}, want: 300},
		"b: its manifest, config and snapshot":         {refs: []Ref{ref(ImageRef, "k8s.io", "b:1")}, want: 1 + 10 + 400},
		"a and b: the base snapshot with them":         {refs: []Ref{ref(ImageRef, "k8s.io", "a:1"), ref(ImageRef, "k8s.io", "b:1")}, want: 300 + 1 + 10 + 400 + 2000},
		"the lease":                                    {refs: []Ref{ref(LeaseRef, "k8s.io", "pull")}, want: 50},
		"a record not there":                           {refs: []Ref{ref(ImageRef, "k8s.io", "gone:1")}, want: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := g.Exclusive(c.refs); got != c.want {
				t.Errorf("Exclusive = %d, want %d", got, c.want)
			}
		})
	}
	// default's config names a snapshot s-a2 it has no record of: no disk.
	want := []Unheld{{Ref: ref(ContentRef, "", "l-stray"), Bytes: 7}}
	if diff := cmp.Diff(want, g.Unheld()); diff != "" {
		t.Errorf("Unheld (-want +got):\n%s", diff)
	}
	if got, w := g.Total(), uint64(1+10+1+10+1000+7+50+2000+300+400); got != w {
		t.Errorf("Total = %d, want %d", got, w)
	}
}
