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

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

const airgapImage = "example.com/airgap/tool:1"

// protectedNode is a seeded node with an image side-loaded without a
// repository digest, and a references directory as a worker pod mounts it:
// junk a used by a pod bound to the node, junk b by a Deployment (by its
// repository digest), junk c by a CronJob.
func protectedNode(t *testing.T) (*node, string) {
	t.Helper()
	n := seed(t)
	n.ImportUnpulled(t, testcontainerd.Image{Tags: []string{airgapImage}, RandomBytes: 2048})
	byDigest := n.AddRepoDigest(t, junkB)
	dir := t.TempDir()
	err := references.WriteDir(dir,
		[]references.Ref{{Image: junkA, Owner: "Pod shop/web-0"}},
		// "junk/c:1" is docker.io/junk/c:1, another image: it protects nothing here.
		[]references.Ref{{Image: byDigest, Owner: "Deployment shop/night"}, {Image: "junk/c:1", Owner: "CronJob batch/other"},
			{Image: junkC, Owner: "CronJob batch/c"}})
	if err != nil {
		t.Fatal(err)
	}
	return n, dir
}

// outcomesIn finds, in a worker's log, which of the images kept names
// got the outcome kept gives it.
func outcomesIn(stderr string, kept map[string]string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(stderr, "\n") {
		for name, outcome := range kept {
			if strings.Contains(line, `"`+name+`"`) && strings.Contains(line, `"outcome":"`+outcome+`"`) {
				got[name] = outcome
			}
		}
	}
	return got
}

// TestWorkloadImagesKept: on a real containerd, "*" and a scheduled run keep
// what the node's pods and the cluster's templates reference and what was
// side-loaded, with their reasons; an ImageList that names them removes
// them; a references directory with a part missing removes nothing.
func TestWorkloadImagesKept(t *testing.T) {
	n, dir := protectedNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	refs := "--references-dir=" + dir
	kept := map[string]string{junkA: "referenced", junkB: "referenced", junkC: "referenced", airgapImage: "not re-pullable"}
	outcomes := func(stderr string) map[string]string { return outcomesIn(stderr, kept) }

	// A dry run of "*" first: the report a user reads before the real run.
	r := runWorker(t, ctx, "remover", "--dry-run", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.Endpoint, refs)
	if r.Code != 0 || r.Summary.Counts["referenced"] != 3 || r.Summary.Counts["not re-pullable"] != 1 {
		t.Fatalf("dry run: exit %d, counts %v\n%s", r.Code, r.Summary.Counts, r.Stderr)
	}
	for _, want := range []string{"pod shop/web-0 on this node", "referenced by Deployment shop/night", "referenced by CronJob batch/c"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("the dry run's log does not say %q", want)
		}
	}
	if diff := cmp.Diff(kept, outcomes(r.Stderr)); diff != "" {
		t.Errorf("dry run outcomes (-want +got):\n%s", diff)
	}

	_, remover := scheduled(t, ctx, n.Endpoint, []string{"--min-age=0s"}, refs)
	if diff := cmp.Diff(kept, outcomes(remover.Stderr)); diff != "" {
		t.Errorf("scheduled run outcomes (-want +got):\n%s\n%s", diff, remover.Stderr)
	}
	for name := range kept {
		if !n.present(t)[name] {
			t.Errorf("the scheduled run removed %s", name)
		}
	}
	if n.present(t)[junkD] {
		t.Errorf("the scheduled run kept %s, which nothing references", junkD)
	}

	// A part missing: the run stops before it removes anything.
	broken := filepath.Join(t.TempDir(), "refs")
	if err := os.CopyFS(broken, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(broken, references.ClusterDir)); err != nil {
		t.Fatal(err)
	}
	before := n.present(t)
	r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.Endpoint, "--references-dir="+broken)
	if r.Code != 1 || !strings.Contains(r.Summary.Error, "nothing removed") {
		t.Errorf("without the cluster set: exit %d, error %q, want 1 and nothing removed", r.Code, r.Summary.Error)
	}
	if diff := cmp.Diff(before, n.present(t)); diff != "" {
		t.Errorf("a run without its references changed the node (-before +after):\n%s", diff)
	}

	r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, junkA, junkB, junkC, airgapImage), "--runtime-endpoint="+n.Endpoint, refs)
	if r.Code != 0 || r.Summary.Counts["removed"] != 4 {
		t.Fatalf("ImageList naming them: exit %d, counts %v\n%s", r.Code, r.Summary.Counts, r.Stderr)
	}
	for name := range kept {
		if n.present(t)[name] {
			t.Errorf("an ImageList named %s and it is still there", name)
		}
	}
}
