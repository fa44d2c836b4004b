//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// TestKeepVersions: keepVersions 2 on a node with five versions of one
// repository, pulled one after the other, the second oldest referenced by a
// Deployment: a scheduled run keeps the two newest and the referenced one
// (which counts among the newest) and removes the other two as Superseded;
// the seeded images, each the only version of its repository, stay.
func TestKeepVersions(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var tags []string
		for i := 1; i <= 5; i++ {
			tag := fmt.Sprintf("example.com/versions/app:1.%d", i)
			tags = append(tags, tag)
			// One import at a time: each arrives after the one before.
			n.Import(t, testimage.Image{Tags: []string{tag}, RandomBytes: 2048})
		}
		dir := t.TempDir()
		if err := references.WriteDir(dir, nil, []references.Ref{{Image: tags[1], Owner: "Deployment shop/app"}}); err != nil {
			t.Fatal(err)
		}
		before := n.present(t)
		_, rm := scheduled(t, ctx, n.CRIEndpoint(), n.workerArgs("--state-dir="+t.TempDir(), "--min-age=0s", "--keep-versions=2"), "--references-dir="+dir)
		present := n.present(t)
		got := map[string]bool{}
		for _, tag := range tags {
			got[tag] = present[tag]
		}
		want := map[string]bool{tags[0]: false, tags[1]: true, tags[2]: false, tags[3]: true, tags[4]: true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("versions left (-want +got):\n%s\n%s", diff, rm.Stderr)
		}
		if by := rm.Summary.RemovedBy["Superseded"]; by.Images != 2 || rm.Summary.Counts["removed"] != 2 {
			t.Errorf("summary %+v: want 2 removed, both Superseded", rm.Summary)
		}
		if rm.Summary.Counts["referenced"] < 1 {
			t.Errorf("counts %v: the referenced version not counted as referenced", rm.Summary.Counts)
		}
		for tag := range before {
			if !strings.HasPrefix(tag, "example.com/versions/") && !present[tag] {
				t.Errorf("%s, the only version of its repository, was removed", tag)
			}
		}
		if !strings.Contains(rm.Stderr, "4 newer versions of example.com/versions/app on the node") {
			t.Errorf("the log does not say why the oldest went:\n%s", rm.Stderr)
		}
	})
}

// TestCoolDown: an image removed and then pulled back (the same content
// imported again) is a return in the node's removal ledger; the next
// scheduled run, whose policy would remove every candidate, keeps it as
// cooling down and removes the others; once its hold is over (a pinned
// clock a day later) a run removes it.
func TestCoolDown(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		const tag = "example.com/cooldown/app:1"
		// Fixed content: the import after the removal gives the same image
		// ID, as a pull of the same digest does.
		img := testimage.Image{Tags: []string{tag}, Files: map[string][]byte{"data": []byte(strings.Repeat("cool-down ", 512))}}
		n.Import(t, img)
		state := "--state-dir=" + t.TempDir()
		r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, tag), "--runtime-endpoint="+n.CRIEndpoint(), state)
		if r.Code != 0 || r.Summary.Counts["removed"] != 1 || n.present(t)[tag] {
			t.Fatalf("the removal: exit %d, summary %+v\n%s", r.Code, r.Summary, r.Stderr)
		}
		// The ledger's removal time is rounded up to the second; a return
		// is a reading begun after it.
		time.Sleep(1100 * time.Millisecond)
		n.Import(t, img)

		_, rm := scheduled(t, ctx, n.CRIEndpoint(), n.workerArgs(state, "--min-age=0s"))
		if !n.present(t)[tag] || rm.Summary.Counts["cooling down"] != 1 {
			t.Fatalf("the run after the return: present %v, summary %+v\n%s", n.present(t)[tag], rm.Summary, rm.Stderr)
		}
		if !strings.Contains(rm.Stderr, "came back once after a removal") {
			t.Errorf("the log does not say why it was kept:\n%s", rm.Stderr)
		}
		if rm.Summary.Counts["removed"] == 0 || n.present(t)[junkD] {
			t.Errorf("the run kept what did not come back: summary %+v", rm.Summary)
		}

		_, rm = scheduled(t, ctx, n.CRIEndpoint(), n.workerArgs(state, "--min-age=0s", rfc3339(time.Now().Add(25*time.Hour))))
		if n.present(t)[tag] || rm.Summary.Counts["cooling down"] != 0 {
			t.Fatalf("a day later: present %v, summary %+v\n%s", n.present(t)[tag], rm.Summary, rm.Stderr)
		}
	})
}
