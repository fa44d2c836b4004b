package jobdata

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// longNodeName is a 253-character DNS subdomain, as a cloud might name
// node i: a label of its own (a pool, a 40-hex-digit id, the index), then
// labels every node shares.
func longNodeName(i int) string {
	id := sha256.Sum256([]byte(strconv.Itoa(i)))
	shared := strings.Repeat("abcdefghi", 7)[:63]
	return fmt.Sprintf("pool-%x-%015d.%s.%s.%s", id[:20], i, shared, shared, shared)
}

// randomNames are 253-character names with nothing to compress: the worst
// case, not a cluster's.
func randomNames(n int) []string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]string, n)
	for k := range out {
		b := make([]byte, 253)
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		for _, i := range []int{63, 127, 191} {
			b[i] = '.'
		}
		out[k] = string(b)
	}
	return out
}

func longNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = longNodeName(i)
	}
	return out
}

// listOf is a node list of targets, a tenth of them skipped instead.
func listOf(names []string) Nodes {
	var n Nodes
	for i, name := range names {
		if i%10 == 9 {
			n.Skipped = append(n.Skipped, nodefilter.Skipped{Name: name, Reason: "NotReady", Detail: "since 2026-12-03T10:00:00Z"})
			continue
		}
		n.Targets = append(n.Targets, nodefilter.Target{Name: name, OS: podpaths.OS("linux")})
	}
	return n
}

// TestNodesRoundTrip: every form of the node list comes back as it was
// written: plain when it fits, compressed, or split into parts.
func TestNodesRoundTrip(t *testing.T) {
	cases := map[string]struct {
		n     Nodes
		limit int
		form  string
	}{
		"empty":                    {n: Nodes{}, limit: MaxSize, form: "plain"},
		"a few":                    {n: listOf([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}), limit: MaxSize, form: "plain"},
		"no skipped, no detail":    {n: Nodes{Targets: []nodefilter.Target{{Name: "a", OS: "windows"}}, Skipped: []nodefilter.Skipped{{Name: "b", Reason: "Excluded"}}}, limit: MaxSize, form: "plain"},
		"10,000 long names":        {n: listOf(longNames(10000)), limit: MaxSize, form: "compressed"},
		"10,000 random names":      {n: listOf(randomNames(10000)), limit: MaxSize, form: "split"},
		"small parts":              {n: listOf(longNames(300)), limit: 1000, form: "split"},
		"only skipped, compressed": {n: Nodes{Skipped: listOf(longNames(100)).Skipped}, limit: 100, form: "split"},
	}
	type out struct {
		Form  string
		Nodes Nodes
	}
	got, want := map[string]out{}, map[string]out{}
	for name, tc := range cases {
		data, bin, parts, err := encodeNodes(tc.n, tc.limit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		form := "plain"
		switch {
		case parts != nil:
			form = "split"
		case bin != nil:
			form = "compressed"
		}
		for k, p := range parts {
			if len(p) > tc.limit {
				t.Errorf("%s: part %d takes %d bytes, over %d", name, k+1, len(p), tc.limit)
			}
		}
		n, err := decodeNodes(data, bin, func(k int) ([]byte, error) { return parts[k-1], nil })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name], want[name] = out{form, n}, out{tc.form, tc.n}
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestNodesReadsPlainForm: a list every earlier release wrote (plain
// lines) is read as it always was, lines it cannot read skipped.
func TestNodesReadsPlainForm(t *testing.T) {
	data := map[string]string{
		keyNodes:   "a linux\nb windows\nbroken\n",
		keySkipped: "c NotReady\nd Excluded by filter\nx\n",
	}
	n, err := decodeNodes(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Nodes{
		Targets: []nodefilter.Target{{Name: "a", OS: "linux"}, {Name: "b", OS: "windows"}},
		Skipped: []nodefilter.Skipped{{Name: "c", Reason: "NotReady"}, {Name: "d", Reason: "Excluded", Detail: "by filter"}},
	}
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("plain form (-want +got):\n%s", diff)
	}
}

// TestNodesUnreadable: a damaged compressed or split list is ErrInvalid
// (or the part's own read error), never a shorter list taken for truth.
func TestNodesUnreadable(t *testing.T) {
	z, err := Gzip([]byte("a linux\n"))
	if err != nil {
		t.Fatal(err)
	}
	missing := errors.New("part missing")
	cases := map[string]struct {
		data map[string]string
		bin  map[string][]byte
		want error
	}{
		"not gzip":           {bin: map[string][]byte{keyNodesZ: []byte("a linux")}, want: ErrInvalid},
		"no separator":       {bin: map[string][]byte{keyNodesZ: z}, want: ErrInvalid},
		"parts not a number": {data: map[string]string{keyParts: "x"}, want: ErrInvalid},
		"too many parts":     {data: map[string]string{keyParts: "1000"}, want: ErrInvalid},
		"a part missing":     {data: map[string]string{keyParts: "2"}, want: missing},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		_, err := decodeNodes(tc.data, tc.bin, func(int) ([]byte, error) { return nil, missing })
		got[name], want[name] = errors.Is(err, tc.want), true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestRecordSizesAt10000Nodes measures, through the encodings the manager
// writes, the job records of 10,000 nodes with 253-character names: the
// node list and a catch-up's job data confined to every node. Each must
// fit in one ConfigMap, or be split into parts that each fit.
func TestRecordSizesAt10000Nodes(t *testing.T) {
	const nodes = 10000
	type size struct {
		Fits    bool
		Objects int
	}
	measure := func(name string, names []string) map[string]size {
		out := map[string]size{}
		data, bin, parts, err := encodeNodes(listOf(names), MaxSize)
		if err != nil {
			t.Fatalf("%s node list: %v", name, err)
		}
		total, largest := values(data, bin), values(data, bin)
		for _, p := range parts {
			total += len(p)
			largest = max(largest, len(p))
		}
		t.Logf("%s: node list %d bytes (%.1f a node), %d object(s), largest %d", name, total, float64(total)/nodes, 1+len(parts), largest)
		out["node list"] = size{Fits: largest <= MaxSize, Objects: 1 + len(parts)}

		cm, err := configMap(&eraserv1.ImageJob{}, "", Data{Kind: podspec.KindCollector, Raw: []byte("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n"), Nodes: names})
		if err != nil {
			t.Logf("%s: catch-up job data: %v", name, err)
			out["catch-up job data"] = size{}
			return out
		}
		b := values(cm.Data, cm.BinaryData)
		t.Logf("%s: catch-up job data %d bytes (%.1f a node)", name, b, float64(b)/nodes)
		out["catch-up job data"] = size{Fits: b <= MaxSize, Objects: 1}
		return out
	}
	got := map[string]map[string]size{
		"long names":   measure("long names", longNames(nodes)),
		"random names": measure("random names", randomNames(nodes)),
	}
	want := map[string]map[string]size{
		"long names": {"node list": {Fits: true, Objects: 1}, "catch-up job data": {Fits: true, Objects: 1}},
		// Nothing to compress: the list is split; a catch-up of every
		// node is too large, and the schedule halves it (schedule_catchup.go).
		"random names": {"node list": {Fits: true, Objects: 3}, "catch-up job data": {}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
}

func values(data map[string]string, bin map[string][]byte) int {
	n := 0
	for _, v := range data {
		n += len(v)
	}
	for _, v := range bin {
		n += len(v)
	}
	return n
}

// FuzzDecodeNodes: whatever a node list's ConfigMap holds, reading it
// never panics.
func FuzzDecodeNodes(f *testing.F) {
	z, err := Gzip([]byte("a linux\n--\nb NotReady\n"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("a linux\n", "b NotReady x\n", "", z)
	f.Add("", "", "2", []byte("junk"))
	f.Fuzz(func(t *testing.T, targets, skipped, parts string, compressed []byte) {
		data := map[string]string{keyNodes: targets, keySkipped: skipped}
		if parts != "" {
			data[keyParts] = parts
		}
		var bin map[string][]byte
		if compressed != nil {
			bin = map[string][]byte{keyNodesZ: compressed}
		}
		_, _ = decodeNodes(data, bin, func(int) ([]byte, error) { return compressed, nil })
	})
}
