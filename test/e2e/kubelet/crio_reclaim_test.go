//go:build !cgo || exclude_graphdriver_btrfs

package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
)

// crioReclaim: with the policy reclaiming CRI-O's leftovers, an ImageList's
// worker pod on the CRI-O node (its store and run root mounted writable,
// the two capabilities the pod spec adds) deletes the storage of a
// container CRI-O no longer lists, made an hour and more ago, and keeps
// that of a container CRI-O runs and every image.
func crioReclaim(t *testing.T) {
	used := crioImage("crio-reclaim-used")
	pullToCRIO(t, crioNodes, seedImages(t, used)...)
	node := crioNodes[0]
	runPod(t, node.Name, "crio-reclaim-uses-image", used)
	runRoot := filepath.Join(node.Dir, "crio", "run")
	st := testcrio.OpenStore(t, node.ImageFs, runRoot)
	var imageID string
	for id, names := range storeImages(t, node.ImageFs) {
		if strings.Contains(names, used) {
			imageID = id
		}
	}
	if imageID == "" {
		t.Fatalf("%s is not in the CRI-O node's store", used)
	}
	orphan := testcrio.Orphan(t, st, node.ImageFs, "k8s_lost_lost_default_uid-lost_0", imageID, 2<<20)
	testcrio.Backdate(t, node.ImageFs, 2*time.Hour, orphan.ID, orphan.LayerID)
	if !storeHolds(t, node.ImageFs, orphan.ID) {
		t.Fatal("the orphan's storage is not in the store")
	}

	// crioRunRoot lies under /run, as a node's CRI-O keeps it; this node's
	// is in its own directory, reached through a link there.
	link := filepath.Join("/run", "eraser-e2e-crio-run-"+node.Name)
	_ = os.Remove(link)
	if err := os.Symlink(runRoot, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(link) })
	config := forCRIO(strings.Replace(baseConfig, "  imageJob:\n",
		"  leftovers:\n    reclaim: [orphan-container, unreferenced-layer]\n    crioRunRoot: "+link+"\n  imageJob:\n", 1))
	setConfig(t, config)
	t.Cleanup(func() { setConfig(t, forCRIO(baseConfig)) })

	il := runImageList(t, "crio-reclaim", crioImage("crio-reclaim-absent"))
	if il.Status.Success != int64(len(crioNodes)) || il.Status.Failed != 0 {
		t.Errorf("status: %d succeeded, %d failed; want %d, 0", il.Status.Success, il.Status.Failed, len(crioNodes))
	}
	if storeHolds(t, node.ImageFs, orphan.ID) {
		t.Errorf("the storage of container %s, which CRI-O does not list, is still in the store", orphan.ID)
	}
	expectImages(t, node, []string{used, eraserImage("remover")}, nil)
	// CRI-O goes on with what changed under it: a pod from the image the
	// orphan held runs.
	runPod(t, node.Name, "crio-reclaim-after", used)
	expectJobsCleanedUp(t)
}

// storeImages are a store's image IDs with their names, joined.
func storeImages(t *testing.T, root string) map[string]string {
	t.Helper()
	r, err := criorecords.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, img := range r.Images {
		out[img.ID] = strings.Join(img.Names, " ")
	}
	return out
}

// storeHolds says whether a store has the container's storage.
func storeHolds(t *testing.T, root, containerID string) bool {
	t.Helper()
	r, err := criorecords.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Containers {
		if c.ID == containerID {
			return true
		}
	}
	return false
}
