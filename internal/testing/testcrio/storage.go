//go:build linux && (!cgo || exclude_graphdriver_btrfs)

package testcrio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.podman.io/storage"
	"go.podman.io/storage/pkg/lockfile"
	storagetypes "go.podman.io/storage/types"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// OpenStore opens a CRI-O store through containers/storage, as Podman
// would beside CRI-O: what a test makes there is what the store's own
// users leave. It is never shut down: that would unmount CRI-O's home.
func OpenStore(t testing.TB, graphRoot, runRoot string) storage.Store {
	t.Helper()
	st, err := storage.GetStore(storagetypes.StoreOptions{
		GraphRoot: graphRoot, RunRoot: runRoot, GraphDriverName: "overlay",
		GraphDriverOptions: []string{"overlay.skip_mount_home=true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Store is OpenStore of this CRI-O's store.
func (c *CRIO) Store(t testing.TB) storage.Store {
	return OpenStore(t, c.RootDir(), filepath.Join(c.Dir, "run"))
}

// Orphan makes the storage of a container CRI-O made for a pod and no
// longer lists (cri-o/cri-o#6981), from imageID, with written bytes in its
// read-write layer.
func Orphan(t testing.TB, st storage.Store, graphRoot, name, imageID string, written int) *storage.Container {
	t.Helper()
	meta := fmt.Sprintf(`{"pod-name":"gone","pod-id":"%064x","name":%q}`, time.Now().UnixNano(), name)
	c, err := st.CreateContainer("", []string{name}, imageID, "", meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := criorecords.LayerDir(graphRoot, "overlay", c.LayerID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "written.bin"), bytes.Repeat([]byte("w"), written), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// Backdate moves the creation of the records with the given IDs (layers
// and containers) back by age, under the store's locks, as if they had
// been there that long: a leftover younger than the workers' record age
// is not judged.
func Backdate(t testing.TB, graphRoot string, age time.Duration, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, kind := range []string{"layers", "containers"} {
		dir := filepath.Join(graphRoot, "overlay-"+kind)
		lock, err := lockfile.GetLockFile(filepath.Join(dir, kind+".lock"))
		if err != nil {
			t.Fatal(err)
		}
		rewrite(t, lock, filepath.Join(dir, kind+".json"), func(rec map[string]any) {
			if !want[fmt.Sprint(rec["id"])] {
				return
			}
			if created, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["created"])); err == nil {
				rec["created"] = created.Add(-age).Format(time.RFC3339Nano)
			}
		})
	}
}

// MarkIncomplete flags a layer incomplete under the layers' lock, as an
// interrupted pull leaves it. The store's next write deletes it.
func MarkIncomplete(t testing.TB, graphRoot, id string) {
	t.Helper()
	dir := filepath.Join(graphRoot, "overlay-layers")
	lock, err := lockfile.GetLockFile(filepath.Join(dir, "layers.lock"))
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, lock, filepath.Join(dir, "layers.json"), func(rec map[string]any) {
		if rec["id"] == id {
			rec["flags"] = map[string]any{"incomplete": true}
		}
	})
}

// rewrite changes each record of file under lock, and records the write
// so that every user of the store reads the records again.
func rewrite(t testing.TB, lock *lockfile.LockFile, file string, change func(map[string]any)) {
	t.Helper()
	lock.Lock()
	defer lock.Unlock()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		change(r)
	}
	if data, err = json.Marshal(recs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.RecordWrite(); err != nil {
		t.Fatal(err)
	}
}
