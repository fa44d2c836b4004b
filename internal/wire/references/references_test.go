package references

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func refs(n int) []Ref {
	out := make([]Ref, n)
	for i := range out {
		out[i] = Ref{Image: fmt.Sprintf("registry-%d.example.com/team/app-%d:v%d", i%97, i, i%7), Owner: Owner("Deployment", "ns", fmt.Sprintf("d-%d", i))}
	}
	return out
}

// readAll reads a directory's sets back.
func readAll(t *testing.T, dir string) (node, cluster []Ref, st Stats, err error) {
	t.Helper()
	st, err = ReadDir(dir, func(r Ref, onNode bool) {
		if onNode {
			node = append(node, r)
		} else {
			cluster = append(cluster, r)
		}
	})
	return node, cluster, st, err
}

// TestRoundTrip: what the manager writes is what the worker reads, in
// one part or many, deduplicated and in order.
func TestRoundTrip(t *testing.T) {
	cases := map[string]struct {
		node, cluster []Ref
		maxBytes      int
		wantParts     int
	}{
		"empty":                {wantParts: 1},
		"one part":             {node: refs(3), cluster: refs(100), wantParts: 1},
		"many parts":           {node: refs(3), cluster: refs(20000), maxBytes: 64 * 1024, wantParts: 0},
		"duplicates collapsed": {cluster: append(refs(10), refs(10)...), wantParts: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			set, parts, err := EncodeCluster(append([]Ref{}, tc.cluster...), tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantParts > 0 && len(parts) != tc.wantParts {
				t.Errorf("%d parts, want %d", len(parts), tc.wantParts)
			}
			if tc.maxBytes > 0 && len(parts) < 2 {
				t.Errorf("%d parts: the limit %d split nothing", len(parts), tc.maxBytes)
			}
			for k, p := range parts {
				if tc.maxBytes > 0 && len(p) > tc.maxBytes {
					t.Errorf("part %d: %d bytes, over the limit %d", k+1, len(p), tc.maxBytes)
				}
			}
			dir := t.TempDir()
			writeParts(t, dir, tc.node, parts)
			node, cluster, st, err := readAll(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(Dedupe(append([]Ref{}, tc.cluster...)), Dedupe(cluster), cmpEmpty); diff != "" {
				t.Errorf("cluster set (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Dedupe(append([]Ref{}, tc.node...)), node, cmpEmpty); diff != "" {
				t.Errorf("node set (-want +got):\n%s", diff)
			}
			if st.Set != set || st.Parts != len(parts) || !st.NodeComplete || !st.ClusterComplete {
				t.Errorf("stats %+v, want set %s in %d parts, both complete", st, set, len(parts))
			}
			for k, p := range parts {
				if limit := tc.maxBytes; limit > 0 && len(p) > limit {
					t.Errorf("part %d is %d bytes, over %d", k+1, len(p), limit)
				}
			}
		})
	}
}

var cmpEmpty = cmp.Transformer("nilIsEmpty", func(r []Ref) []Ref {
	if len(r) == 0 {
		return nil
	}
	return r
})

func writeParts(t *testing.T, dir string, node []Ref, parts [][]byte) {
	t.Helper()
	for _, d := range []string{NodeDir, ClusterDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, NodeDir, NodeFile), []byte(EncodeNode(node)), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, p := range parts {
		if err := os.WriteFile(filepath.Join(dir, ClusterDir, PartFile(k+1)), p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRefused: a worker never judges with part of a set.
func TestRefused(t *testing.T) {
	_, parts, err := EncodeCluster(refs(20000), 64*1024)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := EncodeCluster(refs(19999), 64*1024)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(dir string){
		"a part missing":        func(dir string) { _ = os.Remove(filepath.Join(dir, ClusterDir, PartFile(2))) },
		"no part":               func(dir string) { _ = os.RemoveAll(filepath.Join(dir, ClusterDir)) },
		"a part of another set": func(dir string) { _ = os.WriteFile(filepath.Join(dir, ClusterDir, PartFile(2)), other[1], 0o644) },
		"a part cut short": func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, ClusterDir, PartFile(1)), parts[0][:len(parts[0])/2], 0o644)
		},
		"a part twice":       func(dir string) { _ = os.WriteFile(filepath.Join(dir, ClusterDir, "part-99.gz"), parts[0], 0o644) },
		"no node file":       func(dir string) { _ = os.Remove(filepath.Join(dir, NodeDir, NodeFile)) },
		"an empty node file": func(dir string) { _ = os.WriteFile(filepath.Join(dir, NodeDir, NodeFile), nil, 0o644) },
		"a node set cut short": func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, NodeDir, NodeFile), []byte(nodeHeader+"nginx\tPod a/b"), 0o644)
		},
		"not gzip": func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, ClusterDir, PartFile(1)), []byte("nginx\tPod a/b\n"), 0o644)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeParts(t, dir, refs(2), parts)
			damage(dir)
			if _, _, _, err := readAll(t, dir); !errors.Is(err, ErrInvalid) {
				t.Fatalf("read: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestOddReferencesDropped: a reference no image reference can be (a tab,
// a space, a newline) is left out, never written so that it shifts the
// lines after it.
func TestOddReferencesDropped(t *testing.T) {
	in := []Ref{{Image: "a\tb", Owner: "Pod x/y"}, {Image: "nginx\nevil", Owner: "Pod x/y"}, {Image: "ok", Owner: "Pod x/y"}, {Image: "", Owner: "Pod x/y"}}
	var got []Ref
	if _, err := ScanNode(strings.NewReader(EncodeNode(in)), func(r Ref) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Ref{{Image: "ok", Owner: "Pod x/y"}}, got); diff != "" {
		t.Error(diff)
	}
}

// FuzzReaders: no input makes the readers panic, and a part they accept
// yields only well-formed references.
func FuzzReaders(f *testing.F) {
	_, parts, _ := EncodeCluster(refs(50), 0)
	f.Add([]byte(EncodeNode(refs(5))), parts[0])
	f.Add([]byte(Incomplete), []byte{0x1f, 0x8b})
	f.Add([]byte(nodeHeader+"nginx\tPod a/b\n"), parts[0])
	incomplete, _ := EncodeIncomplete()
	f.Add([]byte(Incomplete), incomplete.Parts[0])
	dropped, _ := Encode([]Ref{{Image: randomImage(8*1024, 2), Owner: "Deployment a/b"}, {Image: "nginx", Owner: "Pod a/b"}}, 4*1024)
	f.Add([]byte(EncodeNode(nil)), dropped.Parts[0])
	f.Fuzz(func(t *testing.T, node, part []byte) {
		check := func(r Ref) {
			if r.Image == "" || strings.ContainsAny(r.Image, "\t\n") || strings.Contains(r.Owner, "\n") {
				t.Fatalf("malformed reference %q", r)
			}
		}
		_, _ = ScanNode(bytes.NewReader(node), check)
		var c ClusterReader
		_ = c.Scan("p", bytes.NewReader(part), check)
		_ = c.Done()
	})
}

// randomImage is an image string of n random letters: it does not
// compress, as a tenant's would not.
func randomImage(n int, seed byte) string {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = 'a' + byte(x>>24)%26
	}
	return string(b)
}

// TestEncodeNeverFailsOnSize: a reference that alone is larger than a part,
// and references past MaxParts, are left out and the set is written
// incomplete, which its reader reports; the rest is read back.
func TestEncodeNeverFailsOnSize(t *testing.T) {
	huge := Ref{Image: randomImage(64*1024, 1), Owner: "Deployment tenant-a/big"}
	many := make([]Ref, 0, 1000)
	for i := range 1000 {
		many = append(many, Ref{Image: randomImage(1024, byte(i)) + strconv.Itoa(i), Owner: "Deployment ns/d"})
	}
	// Read and Dropped add up to the references given, each read or left
	// out, never both.
	type result struct {
		Parts    int
		Dropped  bool
		Complete bool
		Total    int
	}
	cases := map[string]struct {
		in       []Ref
		maxBytes int
		want     result
	}{
		"one reference larger than a part": {in: append(refs(3), huge), maxBytes: 16 * 1024, want: result{Parts: 1, Dropped: true, Total: 4}},
		"only that reference":              {in: []Ref{huge}, maxBytes: 16 * 1024, want: result{Parts: 1, Dropped: true, Total: 1}},
		// 1 KiB of random letters compresses to about 600 bytes: 1,000 of
		// them need about 40 parts of 16 KiB.
		"more parts than a set may have": {in: many, maxBytes: 16 * 1024, want: result{Parts: MaxParts, Dropped: true, Total: 1000}},
		"whole":                          {in: refs(100), want: result{Parts: 1, Complete: true, Total: 100}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			enc, err := Encode(slices.Clone(tc.in), tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeParts(t, dir, nil, enc.Parts)
			_, cluster, st, err := readAll(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			got := result{Parts: len(enc.Parts), Dropped: enc.Dropped > 0, Complete: st.ClusterComplete, Total: len(cluster) + enc.Dropped}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for k, p := range enc.Parts {
				if limit := tc.maxBytes; limit > 0 && len(p) > limit {
					t.Errorf("part %d is %d bytes, over %d", k+1, len(p), limit)
				}
			}
			if enc.Incomplete() == st.ClusterComplete {
				t.Errorf("Incomplete() = %v, the reader's ClusterComplete %v", enc.Incomplete(), st.ClusterComplete)
			}
			if st.Set != SetDigest(slices.Clone(tc.in)) {
				t.Errorf("set %s, SetDigest says %s", st.Set, SetDigest(slices.Clone(tc.in)))
			}
		})
	}
}

// TestEncodeIncomplete: the set written when nothing could be encoded reads
// as an incomplete set without references.
func TestEncodeIncomplete(t *testing.T) {
	enc, err := EncodeIncomplete()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeParts(t, dir, nil, enc.Parts)
	_, cluster, st, err := readAll(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Set: IncompleteSet, Parts: 1, NodeComplete: true}
	if diff := cmp.Diff(want, st); diff != "" || len(cluster) != 0 || !enc.Incomplete() {
		t.Errorf("stats (-want +got):\n%s\nreferences %v, Incomplete() %v", diff, cluster, enc.Incomplete())
	}
}

// TestSetDigestImagesOnly: the set's name depends on its images alone, not
// on which owner is written beside each nor on the order given.
func TestSetDigestImagesOnly(t *testing.T) {
	base := []Ref{{Image: "nginx:1.27", Owner: "Deployment web/front"}, {Image: "busybox", Owner: "CronJob ops/sweep"}}
	cases := map[string]struct {
		refs []Ref
		same bool
	}{
		"the same":                   {refs: base, same: true},
		"another order":              {refs: []Ref{base[1], base[0]}, same: true},
		"another owner":              {refs: []Ref{{Image: "nginx:1.27", Owner: "Pod web/front-abc12"}, base[1]}, same: true},
		"a second owner":             {refs: append(slices.Clone(base), Ref{Image: "nginx:1.27", Owner: "StatefulSet db/pg"}), same: true},
		"an unbound pod is bound":    {refs: append(slices.Clone(base), Ref{Image: "busybox", Owner: "Pod ops/sweep-1"}), same: true},
		"an image more":              {refs: append(slices.Clone(base), Ref{Image: "redis:7", Owner: "Deployment a/b"})},
		"an image less":              {refs: base[:1]},
		"an image dropped as no ref": {refs: append(slices.Clone(base), Ref{Image: "a b", Owner: "Pod a/b"}), same: true},
	}
	want := SetDigest(slices.Clone(base))
	got, wantSame := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		got[name] = SetDigest(slices.Clone(tc.refs)) == want
		wantSame[name] = tc.same
	}
	if diff := cmp.Diff(wantSame, got); diff != "" {
		t.Errorf("same digest as the base set (-want +got):\n%s", diff)
	}
}

// TestIncompleteHeaders: the flag is read from any part, and a header with
// any other third field is refused.
func TestIncompleteHeaders(t *testing.T) {
	cases := map[string]struct {
		header     string
		incomplete bool
		invalid    bool
	}{
		"whole":         {header: headerPrefix + "abc 1/1"},
		"incomplete":    {header: headerPrefix + "abc 1/1 incomplete", incomplete: true},
		"another flag":  {header: headerPrefix + "abc 1/1 partial", invalid: true},
		"flag and more": {header: headerPrefix + "abc 1/1 incomplete x", invalid: true},
	}
	type res struct{ Incomplete, Invalid bool }
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, _, inc, err := parseHeader(tc.header)
			if diff := cmp.Diff(res{tc.incomplete, tc.invalid}, res{inc, err != nil}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
