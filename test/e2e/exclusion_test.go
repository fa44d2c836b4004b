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

// An exclusion list that repeats its key, or writes it in another case,
// fails the node and removes nothing, even under "*": Go's decoder would
// keep only the last list, and the images the first names (keepExact here,
// an image on the node) would be removed.
func TestExclusionRepeatedKeyRemovesNothing(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		before := n.present(t)
		cases := map[string]struct {
			file, want string
		}{
			"repeated key":       {file: `{"excluded":["` + keepExact + `"],"excluded":["example.com/other:1"]}`, want: `key "excluded" appears twice`},
			"re-cased key after": {file: `{"excluded":["` + keepExact + `"],"Excluded":[]}`, want: `keys "excluded" and "Excluded" differ only in case`},
			"re-cased key alone": {file: `{"EXCLUDED":["` + keepExact + `"]}`, want: `the key is "excluded"`},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				// Short: the summary's error is capped, and t.TempDir's path,
				// named after the subtest, would push the reason past the cap.
				dir, err := os.MkdirTemp("", "excl")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.RemoveAll(dir) })
				if err := os.Mkdir(filepath.Join(dir, "exclude-user-list"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "exclude-user-list", "excluded.json"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.CRIEndpoint(), "--exclusion-dir="+dir)
				if r.Code != 1 || !strings.Contains(r.Summary.Error, tc.want) {
					t.Errorf("exit %d, summary error %q; want 1 and %q:\n%s", r.Code, r.Summary.Error, tc.want, r.Stderr)
				}
			})
		}
		if diff := cmp.Diff(before, n.present(t)); diff != "" {
			t.Errorf("images changed (-before +after):\n%s", diff)
		}
	})
}
