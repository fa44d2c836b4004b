package nodereport

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

func TestParseLog(t *testing.T) {
	cases := map[string]struct {
		log   string
		limit int
		want  []Entry
		more  int
	}{
		"remover and collector lines; others skipped": {
			log: `{"time":"t","level":"INFO","msg":"starting","component":"remover"}
{"time":"t","level":"INFO","msg":"image","component":"remover","outcome":"removed","target":"sha256:aa","image":"sha256:aa","names":["docker.io/library/nginx:1.25"],"policy":"Unused","bytes":100}
{"time":"t","level":"ERROR","msg":"image","component":"remover","outcome":"failed","target":"docker.io/x:1","image":"sha256:bb","names":["docker.io/x:1"],"policy":"Listed","detail":"rpc error"}
{"time":"t","level":"INFO","msg":"image","component":"remover","outcome":"not on node","target":"docker.io/y:2"}
{"time":"t","level":"INFO","msg":"image","component":"collector","outcome":"in use","target":"sha256:cc","image":"sha256:cc","names":[],"detail":"container c"}
not json "msg":"image"
{"msg":"image"}
`,
			limit: 10,
			want: []Entry{
				{Image: "docker.io/library/nginx:1.25", ID: "sha256:aa", Outcome: "removed", Policy: "Unused", Bytes: 100},
				{Image: "docker.io/x:1", ID: "sha256:bb", Outcome: "failed", Policy: "Listed", Detail: "rpc error"},
				{Image: "docker.io/y:2", Outcome: "not on node"},
				{Image: "sha256:cc", Outcome: "in use", Detail: "container c"},
			},
		},
		"limit": {
			log:   strings.Repeat(`{"msg":"image","outcome":"removed","target":"a"}`+"\n", 5),
			limit: 2,
			want:  []Entry{{Image: "a", Outcome: "removed"}, {Image: "a", Outcome: "removed"}},
			more:  3,
		},
		"a line over the limit is skipped, the next read": {
			log:   `{"msg":"image","outcome":"removed","target":"` + strings.Repeat("x", maxLine) + `"}` + "\n" + `{"msg":"image","outcome":"in use","target":"b"}`,
			limit: 10,
			want:  []Entry{{Image: "b", Outcome: "in use"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, more, err := ParseLog(strings.NewReader(tc.log), tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if more != tc.more {
				t.Errorf("more = %d, want %d", more, tc.more)
			}
		})
	}
}

func TestEncodeDecode(t *testing.T) {
	nodes := []Node{
		{Name: "a", Counts: map[string]int{"removed": 1, "in use": 1}, BytesFreed: 5, Entries: []Entry{
			{Image: "docker.io/library/nginx:1.25", ID: "sha256:aa", Outcome: "removed", Policy: "Unused", Bytes: 5},
			{Image: "docker.io/library/redis:7", ID: "sha256:bb", Outcome: "in use", Detail: "container c"},
		}},
		{Name: "b", Failed: true, Reason: "RunTimeout", Message: "m", Unavailable: "reading the log: gone", Counts: map[string]int{}},
		{Name: "c", DryRun: true, Entries: []Entry{{Image: "docker.io/library/nginx:1.25", ID: "sha256:aa", Outcome: "removed"}}, Omitted: 3},
	}
	data, err := Encode(nodes)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// Empty maps and slices need not survive.
	nodes[1].Counts, nodes[1].Entries = nil, []Entry{}
	if diff := cmp.Diff(nodes, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for name, bad := range map[string][]byte{"not gzip": []byte("x"), "empty": nil} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// distinctNode is a node whose every image is its own: the worst case for
// the shard's shared table.
func distinctNode(name string, images int) Node {
	n := Node{Name: name, Counts: map[string]int{}}
	for i := range images {
		outcome := "in use"
		if i%10 == 0 {
			outcome = "removed"
		}
		n.Counts[outcome]++
		n.Entries = append(n.Entries, Entry{Image: fmt.Sprintf("registry.example.com/%s/app-%d:v%d", name, i, i), ID: fmt.Sprintf("sha256:%064x", i*7919+len(name)), Outcome: outcome})
	}
	return n
}

// TestSplitBounds: every shard is within budget; a node too big alone keeps
// its removals first and says how many entries it left out.
func TestSplitBounds(t *testing.T) {
	var nodes []Node
	for i := range 30 {
		nodes = append(nodes, distinctNode(fmt.Sprintf("node-%d", i), 500))
	}
	const budget = 64 << 10
	shards, err := Split(nodes, budget)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, s := range shards {
		if len(s.Data) > budget {
			t.Errorf("shard of %d bytes, budget %d", len(s.Data), budget)
		}
		got, err := Decode(s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.Nodes, names(got)); diff != "" {
			t.Errorf("shard's node list (-want +got):\n%s", diff)
		}
		seen += len(got)
	}
	if seen != len(nodes) {
		t.Errorf("%d nodes stored, want %d", seen, len(nodes))
	}

	big := distinctNode("big", 20000)
	shards, err = Split([]Node{big}, budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 1 || len(shards[0].Data) > budget {
		t.Fatalf("one oversized node: %d shards", len(shards))
	}
	got, _ := Decode(shards[0].Data)
	n := got[0]
	if n.Omitted == 0 || len(n.Entries)+n.Omitted != 20000 || n.Counts["removed"] != 2000 {
		t.Errorf("trimmed node: %d entries, %d omitted, counts %v", len(n.Entries), n.Omitted, n.Counts)
	}
	for _, e := range n.Entries[:min(len(n.Entries), 2000)] {
		if e.Outcome != "removed" {
			t.Fatalf("kept entries were stored before removals were: %+v", e)
		}
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add([]byte(`{"msg":"image","outcome":"removed","target":"a","names":["b"],"bytes":3}` + "\n{}\n"))
	f.Add([]byte("\n\n{\"msg\":\"image\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, more, err := ParseLog(strings.NewReader(string(data)), 5)
		if err != nil || len(entries) > 5 || more < 0 {
			t.Fatalf("%d entries, %d more, %v", len(entries), more, err)
		}
		if _, err := Encode([]Node{{Name: "n", Entries: entries}}); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	data, _ := Encode([]Node{distinctNode("n", 3)})
	f.Add(data)
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Decode(data)
	})
}

// TestSplitLongNames: 10,000 nodes of 253-character names, as GKE and EKS
// name nodes at most, fit their ConfigMaps whole: the plain node list each
// shard carries counts against its budget, so the API server's 1 MiB is
// never passed (it refused such a shard, and the report never completed).
func TestSplitLongNames(t *testing.T) {
	var nodes []Node
	for i := range 10000 {
		name := fmt.Sprintf("%05d-", i) + strings.Repeat("n", 247)
		nodes = append(nodes, Node{Name: name, Counts: map[string]int{"removed": 3}, BytesFreed: 3000,
			Entries: []Entry{{Image: "docker.io/library/app:1", Outcome: "removed", Bytes: 1000}}})
	}
	shards, err := Split(nodes, ShardBudget)
	if err != nil {
		t.Fatal(err)
	}
	job := &eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("j", 63), UID: "uid"}}
	stored := 0
	for i, s := range shards {
		cm := ConfigMap(job, "eraser-system", i, s)
		size := 0
		for k, v := range cm.Data {
			size += len(k) + len(v)
		}
		for k, v := range cm.BinaryData {
			size += len(k) + len(v)
		}
		if size > 1<<20 {
			t.Errorf("shard %d: %d bytes, more than a ConfigMap holds", i, size)
		}
		stored += len(s.Nodes)
	}
	if stored != len(nodes) || len(shards) > eraserv1.MaxReportConfigMaps {
		t.Errorf("%d nodes in %d shards, want %d in at most %d", stored, len(shards), len(nodes), eraserv1.MaxReportConfigMaps)
	}
}
