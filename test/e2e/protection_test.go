//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// sideLoaded is an image loaded onto the node without a pull, named under
// localhost/ as podman load, buildah and a provisioning tool name an image
// that no registry holds: on CRI-O, which makes up a repository digest for
// every name, the name is what tells it apart.
const sideLoaded = "localhost/e2e/side-loaded:1"

// protectedNode is a seeded node with an image side-loaded, and a
// references directory as a worker pod mounts it: junk a used by a pod
// bound to the node, junk b by a Deployment (by its repository digest),
// junk c by a CronJob.
func protectedNode(t *testing.T, n *workerNode) string {
	t.Helper()
	n.SideLoad(t, testimage.Image{Tags: []string{sideLoaded}, RandomBytes: 2048})
	dir := t.TempDir()
	err := references.WriteDir(dir,
		[]references.Ref{{Image: junkA, Owner: "Pod shop/web-0"}},
		// "junk/c:1" is docker.io/junk/c:1, another image: it protects nothing here.
		[]references.Ref{{Image: n.RepoDigest(t, junkB), Owner: "Deployment shop/night"}, {Image: "junk/c:1", Owner: "CronJob batch/other"},
			{Image: junkC, Owner: "CronJob batch/c"}})
	if err != nil {
		t.Fatal(err)
	}
	return dir
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

// TestWorkloadImagesKept: "*" and a scheduled run keep what the node's
// pods and the cluster's templates reference and what was side-loaded, with
// their reasons; an ImageList that names them removes them; a references
// directory with a part missing removes nothing.
func TestWorkloadImagesKept(t *testing.T) {
	onEveryRuntime(t, workloadImagesKept)
}

func workloadImagesKept(t *testing.T, n *workerNode) {
	dir := protectedNode(t, n)
	// What docs/protection.md says the runtimes show of a side-loaded
	// image: containerd no repository digest, CRI-O one under localhost/.
	images, err := n.Client(t).ListImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var st *cri.Image
	for i, img := range images {
		if slices.Contains(img.Tags, sideLoaded) {
			st = &images[i]
		}
	}
	if st == nil {
		t.Fatalf("the runtime does not list %s: %+v", sideLoaded, images)
	}
	for _, d := range st.Digests {
		if !strings.HasPrefix(d, "localhost/e2e/side-loaded@sha256:") {
			t.Errorf("the runtime shows %s with repository digest %s, want localhost/ ones only", sideLoaded, d)
		}
	}
	why := "no repository digest"
	if len(st.Digests) > 0 {
		why = "repository digest on localhost/ only"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	refs := "--references-dir=" + dir
	kept := map[string]string{junkA: "referenced", junkB: "referenced", junkC: "referenced", sideLoaded: "not re-pullable"}
	outcomes := func(stderr string) map[string]string { return outcomesIn(stderr, kept) }

	// A dry run of "*" first: the report a user reads before the real run.
	r := runWorker(t, ctx, "remover", "--dry-run", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.CRIEndpoint(), refs)
	if r.Code != 0 || r.Summary.Counts["referenced"] != 3 || r.Summary.Counts["not re-pullable"] != 1 {
		t.Fatalf("dry run: exit %d, counts %v\n%s", r.Code, r.Summary.Counts, r.Stderr)
	}
	for _, want := range []string{"pod shop/web-0 on this node", "referenced by Deployment shop/night", "referenced by CronJob batch/c", why} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("the dry run's log does not say %q", want)
		}
	}
	if diff := cmp.Diff(kept, outcomes(r.Stderr)); diff != "" {
		t.Errorf("dry run outcomes (-want +got):\n%s", diff)
	}

	_, remover := scheduled(t, ctx, n.CRIEndpoint(), n.workerArgs("--min-age=0s"), refs)
	if diff := cmp.Diff(kept, outcomes(remover.Stderr)); diff != "" {
		t.Errorf("scheduled run outcomes (-want +got):\n%s\n%s", diff, remover.Stderr)
	}
	present := n.present(t)
	for name := range kept {
		if !present[name] {
			t.Errorf("the scheduled run removed %s", name)
		}
	}
	if present[junkD] {
		t.Errorf("the scheduled run kept %s, which nothing references and a registry holds", junkD)
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
	r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.CRIEndpoint(), "--references-dir="+broken)
	if r.Code != 1 || !strings.Contains(r.Summary.Error, "nothing removed") {
		t.Errorf("without the cluster set: exit %d, error %q, want 1 and nothing removed", r.Code, r.Summary.Error)
	}
	if diff := cmp.Diff(before, n.present(t)); diff != "" {
		t.Errorf("a run without its references changed the node (-before +after):\n%s", diff)
	}

	r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, junkA, junkB, junkC, sideLoaded), "--runtime-endpoint="+n.CRIEndpoint(), refs)
	if r.Code != 0 || r.Summary.Counts["removed"] != 4 {
		t.Fatalf("ImageList naming them: exit %d, counts %v\n%s", r.Code, r.Summary.Counts, r.Stderr)
	}
	present = n.present(t)
	for name := range kept {
		if present[name] {
			t.Errorf("an ImageList named %s and it is still there", name)
		}
	}
}
