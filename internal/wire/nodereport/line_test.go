package nodereport

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestLineRoundTrip: what a worker logs as a result line is what the
// node's report reads back from its log.
func TestLineRoundTrip(t *testing.T) {
	cases := map[string]struct {
		line Line
		want Entry
	}{
		"a removal": {line: Line{Outcome: "removed", Target: "nginx:1", Image: "sha256:a", Names: []string{"docker.io/library/nginx:1"}, Policy: "unused", Bytes: 42, BytesKnown: true},
			want: Entry{Image: "docker.io/library/nginx:1", ID: "sha256:a", Outcome: "removed", Policy: "unused", Bytes: 42}},
		"an image ID target": {line: Line{Outcome: "in use", Target: "sha256:b", Image: "sha256:b", Detail: "a container runs it"},
			want: Entry{Image: "sha256:b", Outcome: "in use", Detail: "a container runs it"}},
		"a leftover, bytes unknown": {line: Line{Outcome: "reclaimed", Target: "lease-1", Leftover: "old-lease", Bytes: 7, Namespace: "moby", Detail: "why"},
			want: Entry{Image: "lease-1", Outcome: "reclaimed", Detail: "why"}},
		"a scan": {line: Line{Outcome: "vulnerable", Target: "sha256:c", Image: "sha256:c", Names: []string{"app:2"}, Scan: &workerresult.Scan{Verdict: "CVE-1"}},
			want: Entry{Image: "app:2", ID: "sha256:c", Outcome: "vulnerable", Scan: &workerresult.Scan{Verdict: "CVE-1"}}},
	}
	got, want := map[string]Entry{}, map[string]Entry{}
	for name, c := range cases {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		log.Info("not a result line", "outcome", "removed")
		c.line.Log(context.Background(), log, slog.LevelInfo)
		entries, more, err := ParseLog(&buf, 10)
		if err != nil || more != 0 || len(entries) != 1 {
			t.Errorf("%s: %d entries, %d more, %v", name, len(entries), more, err)
			continue
		}
		got[name], want[name] = entries[0], c.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
