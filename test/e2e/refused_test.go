//go:build linux

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// sideloadStuck side-loads an image the way that leaves containerd unable
// to remove it through CRI: imported under an index name that is not a
// normalised reference (ctr images import --index-name), the index name
// deleted with ctr, and the image removed through CRI right after (crictl
// rmi, or the kubelet). containerd's own store has no record of the image
// any more, but its CRI plugin keeps one: it lists the image, untagged, and
// answers every RemoveImage for it with success, for as long as containerd
// runs. This is containerd#14080, of the family of containerd#7698 behind
// upstream Eraser #483 (side-loaded images that CRI cannot remove until
// containerd restarts). It returns the image's ID.
func sideloadStuck(t *testing.T, n *node, tag string) string {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "side.tar")
	if err := testimage.WriteArchive(archive, []testimage.Image{{Tags: []string{tag}, RandomBytes: 2048}}); err != nil {
		t.Fatal(err)
	}
	n.Ctr(t, "images", "import", "--index-name", "side-index", archive)
	n.Ctr(t, "images", "rm", "side-index")
	id := n.ImageIDs(t)[tag]
	if id == "" {
		t.Fatalf("%s is not listed after the import", tag)
	}
	if _, err := n.Images.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}}); err != nil {
		t.Fatal(err)
	}
	// The state lasts: containerd's event handling, which could catch up
	// within a second or two, does not.
	time.Sleep(2 * time.Second)
	if _, ok := n.ImageIDs(t)[id]; !ok {
		t.Fatalf("containerd removed %s: this containerd does not keep side-loaded images, and the test shows no refusal\n%s", id, n.Ctr(t, "version"))
	}
	if ls := n.Ctr(t, "images", "ls", "-q"); strings.Contains(ls, tag) {
		t.Fatalf("containerd still holds a record of %s, so this is not the stale CRI image:\n%s", tag, ls)
	}
	return id
}

// TestRemoverRefusedImage: an image the real containerd will not remove
// (it answers the removal as done and keeps listing the image) does not
// fail the node, on the first run or any later one: the remover exits 0,
// counts it refused, names it in its summary, and its result line (the
// per-node report's entry) says so. The other images go as usual.
func TestRemoverRefusedImage(t *testing.T) {
	n := seed(t)
	const stuckTag = "example.com/side/stuck:1"
	stuck := sideloadStuck(t, n, stuckTag)
	runs := map[string]struct {
		entries []string
		want    map[string]int
	}{
		"1 listed":    {entries: []string{stuck, junkA}, want: map[string]int{"removed": 1, "refused": 1}},
		"2 prune all": {entries: []string{"*"}, want: map[string]int{"removed": 6, "refused": 1, "in use": 2, "pinned": 1}},
	}
	for _, name := range []string{"1 listed", "2 prune all"} {
		tc := runs[name]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, tc.entries...), "--runtime-endpoint="+n.Endpoint)
			if r.Code != 0 || r.Summary.Error != "" {
				t.Fatalf("exit %d, error %q; want 0: a refused image does not fail the node\n%s", r.Code, r.Summary.Error, r.Stderr)
			}
			if diff := cmp.Diff(tc.want, r.Summary.Counts); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if len(r.Summary.Refused) != 1 || !strings.Contains(r.Summary.Refused[0].Message, "still lists it") {
				t.Errorf("summary's refused %+v, want the stuck image", r.Summary.Refused)
			}
			entries, _, err := nodereport.ParseLog(strings.NewReader(r.Stderr), 1000)
			if err != nil {
				t.Fatal(err)
			}
			var refused []nodereport.Entry
			for _, e := range entries {
				if e.Outcome == "refused" {
					refused = append(refused, e)
				}
			}
			if len(refused) != 1 || refused[0].Image != stuck || !strings.Contains(refused[0].Detail, "still lists it") {
				t.Errorf("report entries refused: %+v, want one for %s", refused, stuck)
			}
			if _, ok := n.ImageIDs(t)[stuck]; !ok {
				t.Errorf("the stuck image is gone: containerd removed it after all, and this test no longer shows a refusal")
			}
		})
	}
}
