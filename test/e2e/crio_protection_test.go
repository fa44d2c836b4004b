//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// crioLocal is an image loaded under localhost/, as podman load, buildah
// and a provisioning tool name an image that no registry holds.
const crioLocal = "localhost/e2e/side-loaded:1"

// TestCRIOWorkloadImagesKept: TestWorkloadImagesKept on a real CRI-O. The
// runtime shows every image with a repository digest, made up for each
// name (docs/protection.md), so the one not re-pullable image it can tell
// apart is the localhost/ one: "*" and a scheduled run keep it and the
// referenced images with their reasons, remove an unreferenced pulled one,
// and an ImageList naming them removes them.
func TestCRIOWorkloadImagesKept(t *testing.T) {
	n := seedCRIO(t)
	n.Import(t, testcontainerd.Image{Tags: []string{crioLocal}, RandomBytes: 2048})
	// What docs/protection.md says CRI-O shows: a digest under localhost/
	// and none on a registry.
	st, err := n.Images.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: crioLocal}})
	if err != nil || st.GetImage() == nil {
		t.Fatalf("image status of %s: %v", crioLocal, err)
	}
	digests := st.GetImage().GetRepoDigests()
	for _, d := range digests {
		if !strings.HasPrefix(d, "localhost/e2e/side-loaded@sha256:") {
			t.Errorf("CRI-O shows %s with repository digest %s, want localhost/ ones only", crioLocal, d)
		}
	}
	if len(digests) == 0 {
		t.Logf("CRI-O shows %s with no repository digest (docs/protection.md says it makes one up)", crioLocal)
	}

	dir := t.TempDir()
	err = references.WriteDir(dir,
		[]references.Ref{{Image: junkA, Owner: "Pod shop/web-0"}},
		[]references.Ref{{Image: n.RepoDigest(t, junkB), Owner: "Deployment shop/night"}, {Image: junkC, Owner: "CronJob batch/c"}})
	if err != nil {
		t.Fatal(err)
	}
	refs := "--references-dir=" + dir
	kept := map[string]string{junkA: "referenced", junkB: "referenced", junkC: "referenced", crioLocal: "not re-pullable"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	r := runWorker(t, ctx, "remover", "--dry-run", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.Endpoint, refs)
	if r.Code != 0 || r.Summary.Counts["referenced"] != 3 || r.Summary.Counts["not re-pullable"] != 1 {
		t.Fatalf("dry run: exit %d, counts %v\n%s", r.Code, r.Summary.Counts, r.Stderr)
	}
	if diff := cmp.Diff(kept, outcomesIn(r.Stderr, kept)); diff != "" {
		t.Errorf("dry run outcomes (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.Stderr, "repository digest on localhost/ only") {
		t.Errorf("the dry run's log does not say why %s cannot be pulled back:\n%s", crioLocal, r.Stderr)
	}

	_, remover := scheduled(t, ctx, n.Endpoint, []string{"--min-age=0s"}, refs)
	if diff := cmp.Diff(kept, outcomesIn(remover.Stderr, kept)); diff != "" {
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

	r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, junkA, junkB, junkC, crioLocal), "--runtime-endpoint="+n.Endpoint, refs)
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
