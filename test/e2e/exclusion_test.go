//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestUpstreamExclusionListsKeepImages: exclusion lists in the forms
// upstream accepted (globs it never matched, a re-cased or repeated key,
// unknown fields, keys that hold no list) never fail the node: the run
// under "*" succeeds, and the images they protect stay (keepExact and
// keepWildcard, on the node). Each is tried as a dry run, counted; the
// last removes for real.
func TestUpstreamExclusionListsKeepImages(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		cases := map[string]map[string]string{
			"globs":                       {"excluded.json": `{"excluded":["example.com/keep/ex*ct:1","*/protected/w:*"]}`},
			"tag glob and path glob":      {"excluded.json": `{"excluded":["example.com/keep/exact:1*","example.com/*/w:2"]}`},
			"re-cased key, unknown field": {"excluded.json": `{"Excluded":["` + keepExact + `","example.com/protected/*"],"comment":"from upstream"}`},
			"repeated key":                {"excluded.json": `{"excluded":["` + keepExact + `"],"excluded":["example.com/protected/*"]}`},
			"extra keys": {"excluded.json": `{"excluded":["` + keepExact + `","example.com/protected/*"]}`, "README": "protects the keep images",
				"z-broken.json": `{"excluded":`},
		}
		remove := func(t *testing.T, keys map[string]string, extra ...string) run {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "exclude-user-list"), 0o755); err != nil {
				t.Fatal(err)
			}
			for k, v := range keys {
				if err := os.WriteFile(filepath.Join(dir, "exclude-user-list", k), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append([]string{"--imagelist=" + imageListFile(t, "*"), "--runtime-endpoint=" + n.CRIEndpoint(), "--exclusion-dir=" + dir}, extra...)
			r := runWorker(t, ctx, "remover", args...)
			if r.Code != 0 {
				t.Fatalf("exit %d, summary error %q:\n%s", r.Code, r.Summary.Error, r.Stderr)
			}
			if !strings.Contains(r.Stderr, "read differently from upstream") {
				t.Errorf("no warning in the log:\n%s", r.Stderr)
			}
			return r
		}
		for name, keys := range cases {
			t.Run(name, func(t *testing.T) {
				r := remove(t, keys, "--dry-run")
				if got := r.Summary.Counts["excluded"]; got != 2 {
					t.Errorf("%d excluded, want 2 (%s and %s): %v\n%s", got, keepExact, keepWildcard, r.Summary.Counts, r.Stderr)
				}
			})
		}
		remove(t, cases["globs"])
		if diff := cmp.Diff(n.kept, n.present(t)); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
	})
}
