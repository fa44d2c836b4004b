package criorecords_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// store writes the files (by path under the root) of a store and returns
// its root.
func store(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Records as containers/storage writes them (trimmed of the fields not
// read, but for a few kept to show they are passed over).
const (
	imagesJSON = `[
 {"id":"i-app","digest":"sha256:m1","names":["example.com/app:1","example.com/app@sha256:m1"],"layer":"l-app",
  "mapped-layers":["l-app-mapped"],"big-data-names":["sha256:c1","manifest"],
  "big-data-sizes":{"sha256:c1":1500,"manifest":500},"created":"2026-11-01T00:00:00Z"},
 {"id":"i-scratch","names":["example.com/scratch:1"]}
]`
	layersJSON = `[
 {"id":"l-base","created":"2026-11-01T00:00:00Z","compressed-diff-digest":"sha256:z1","compressed-size":400,"diff-digest":"sha256:d1","diff-size":1024,"compression":2,"uidset":[0],"gidset":[0]},
 {"id":"l-app","parent":"l-base","diff-size":2048},
 {"id":"l-app-mapped","parent":"l-base","diff-size":2048,"uidmap":[{"container_id":0,"host_id":100000,"size":65536}]},
 {"id":"l-pulling","diff-size":0,"flags":{"incomplete":true}},
 {"id":"l-odd-flag","flags":{"incomplete":"yes"}},
 {"id":"rw-app","parent":"l-app","created":"2026-11-02T00:00:00Z"}
]`
	containersJSON = `[
 {"id":"c-app","names":["k8s_app_pod_ns_uid_0"],"image":"i-app","layer":"rw-app",
  "metadata":"{\"pod-name\":\"pod\",\"pod-id\":\"s-pod\",\"image-name\":\"example.com/app:1\",\"image-id\":\"i-app\",\"name\":\"k8s_app_pod_ns_uid_0\"}",
  "created":"2026-11-02T00:00:00Z"},
 {"id":"c-podman","names":["web"],"image":"i-app","layer":"rw-podman","metadata":"{\"image-name\":\"example.com/app:1\",\"name\":\"web\"}"}
]`
)

func TestRead(t *testing.T) {
	t1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)
	full := criorecords.Records{
		Driver: "overlay",
		Images: []criorecords.Image{
			{ID: "i-app", Names: []string{"example.com/app:1", "example.com/app@sha256:m1"}, TopLayer: "l-app", MappedTopLayers: []string{"l-app-mapped"}, BigDataNames: []string{"sha256:c1", "manifest"}, BigDataBytes: 2000, Created: t1},
			{ID: "i-scratch", Names: []string{"example.com/scratch:1"}},
		},
		Layers: []criorecords.Layer{
			{ID: "l-base", DiffBytes: 1024, DiffDigest: "sha256:d1", CompressedDigest: "sha256:z1", CompressedBytes: 400, Created: t1},
			{ID: "l-app", Parent: "l-base", DiffBytes: 2048},
			{ID: "l-app-mapped", Parent: "l-base", DiffBytes: 2048},
			{ID: "l-pulling", Incomplete: true},
			{ID: "l-odd-flag"},
			{ID: "rw-app", Parent: "l-app", Created: t2},
		},
		Containers: []criorecords.Container{
			{ID: "c-app", Image: "i-app", Layer: "rw-app", Names: []string{"k8s_app_pod_ns_uid_0"}, PodID: "s-pod", Created: t2},
			{ID: "c-podman", Image: "i-app", Layer: "rw-podman", Names: []string{"web"}},
		},
	}
	for name, tc := range map[string]struct {
		files   map[string]string
		want    criorecords.Records
		wantErr string // in the error's text
	}{
		"every record": {
			files: map[string]string{"overlay-images/images.json": imagesJSON, "overlay-layers/layers.json": layersJSON, "overlay-containers/containers.json": containersJSON},
			want:  full,
		},
		"volatile records, after the stable ones; an ID in both is read once": {
			files: map[string]string{
				"vfs-images/images.json":                       `[{"id":"i","layer":"l"}]`,
				"vfs-layers/layers.json":                       `[{"id":"l","diff-size":10}]`,
				"vfs-layers/volatile-layers.json":              `[{"id":"rw","parent":"l"},{"id":"l","diff-size":99}]`,
				"vfs-containers/containers.json":               `[{"id":"c1","image":"i","layer":"rw1"}]`,
				"vfs-containers/volatile-containers.json":      `[{"id":"c2","image":"i","layer":"rw"}]`,
				"vfs-containers/c1/userdata/config.json":       `{}`,
				"vfs-layers/l.tar-split.gz":                    "",
				"vfs/dir/l/etc/hostname":                       "x",
				"vfs-images/i/=c2hhMjU2OmMx":                   "{}",
				"vfs-images/images.lock":                       "",
				"vfs-layers/volatile-layers.json.tmp-leftover": "not read",
			},
			want: criorecords.Records{Driver: "vfs",
				Images:     []criorecords.Image{{ID: "i", TopLayer: "l"}},
				Layers:     []criorecords.Layer{{ID: "l", DiffBytes: 10}, {ID: "rw", Parent: "l", Volatile: true}},
				Containers: []criorecords.Container{{ID: "c1", Image: "i", Layer: "rw1"}, {ID: "c2", Image: "i", Layer: "rw", Volatile: true}},
			},
		},
		"an image layer only in the volatile records: read as the stable ones are": {
			files: map[string]string{
				"overlay-images/images.json":          `[{"id":"i","layer":"l-top","big-data-names":["sha256:i"]}]`,
				"overlay-layers/layers.json":          `[{"id":"l-base","diff-digest":"sha256:d1","diff-size":10}]`,
				"overlay-layers/volatile-layers.json": `[{"id":"l-top","parent":"l-base","diff-digest":"sha256:d2","diff-size":20,"compressed-diff-digest":"sha256:z2","compressed-size":7}]`,
			},
			want: criorecords.Records{Driver: "overlay",
				Images: []criorecords.Image{{ID: "i", TopLayer: "l-top", BigDataNames: []string{"sha256:i"}}},
				Layers: []criorecords.Layer{
					{ID: "l-base", DiffBytes: 10, DiffDigest: "sha256:d1"},
					{ID: "l-top", Parent: "l-base", DiffBytes: 20, DiffDigest: "sha256:d2", CompressedDigest: "sha256:z2", CompressedBytes: 7, Volatile: true},
				},
			},
		},
		"no layers or containers yet; empty files as containers/storage leaves them": {
			files: map[string]string{"overlay-images/images.json": ``, "overlay-layers/layers.json": ``},
			want:  criorecords.Records{Driver: "overlay"},
		},
		"null records": {
			files: map[string]string{"overlay-images/images.json": `null`, "overlay-containers/containers.json": `null`},
			want:  criorecords.Records{Driver: "overlay"},
		},
		"records without an ID, negative sizes: left out, counted 0": {
			files: map[string]string{
				"overlay-images/images.json": `[{"names":["x:1"]},{"id":"i","big-data-sizes":{"a":-1,"b":5}}]`,
				"overlay-layers/layers.json": `[{"parent":"l"},{"id":"l","diff-size":-7,"compressed-size":-1}]`,
			},
			want: criorecords.Records{Driver: "overlay", Images: []criorecords.Image{{ID: "i", BigDataBytes: 5}}, Layers: []criorecords.Layer{{ID: "l"}}},
		},
		"document sizes past int64: held at the largest": {
			files: map[string]string{"overlay-images/images.json": `[{"id":"i","big-data-sizes":{"a":9223372036854775807,"b":9223372036854775807}}]`},
			want:  criorecords.Records{Driver: "overlay", Images: []criorecords.Image{{ID: "i", BigDataBytes: math.MaxInt64}}},
		},
		"metadata not CRI-O's JSON: no pod": {
			files: map[string]string{"overlay-images/images.json": `[]`, "overlay-containers/containers.json": `[{"id":"c","metadata":"buildah"}]`},
			want:  criorecords.Records{Driver: "overlay", Containers: []criorecords.Container{{ID: "c"}}},
		},
		"no image records": {
			files:   map[string]string{"overlay-layers/layers.json": layersJSON},
			wantErr: "no containers/storage image records",
		},
		"two drivers": {
			files:   map[string]string{"overlay-images/images.json": `[]`, "vfs-images/images.json": `[]`},
			wantErr: "several drivers",
		},
		"images not records": {
			files:   map[string]string{"overlay-images/images.json": `{"id":"i"}`},
			wantErr: "overlay-images/images.json is not containers/storage's records",
		},
		"an image's time not a time": {
			files:   map[string]string{"overlay-images/images.json": `[{"id":"i","created":"yesterday"}]`},
			wantErr: "overlay-images/images.json is not containers/storage's records",
		},
		"layers not records": {
			files:   map[string]string{"overlay-images/images.json": `[]`, "overlay-layers/layers.json": `[{"id":"l","diff-size":"big"}]`},
			wantErr: "overlay-layers/layers.json is not containers/storage's records",
		},
		"volatile layers cut off": {
			files:   map[string]string{"overlay-images/images.json": `[]`, "overlay-layers/volatile-layers.json": `[{"id":"l"`},
			wantErr: "overlay-layers/volatile-layers.json is not",
		},
		"containers not records": {
			files:   map[string]string{"overlay-images/images.json": `[]`, "overlay-containers/containers.json": `[1]`},
			wantErr: "overlay-containers/containers.json is not",
		},
		"volatile containers not records": {
			files:   map[string]string{"overlay-images/images.json": `[]`, "overlay-containers/volatile-containers.json": `[{"names":"x"}]`},
			wantErr: "overlay-containers/volatile-containers.json is not",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := criorecords.Read(store(t, tc.files))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadNoStore(t *testing.T) {
	if _, err := criorecords.Read(t.TempDir()); !errors.Is(err, criorecords.ErrNoStore) {
		t.Errorf("an empty directory: %v, want ErrNoStore", err)
	}
}

// TestImages: one driver's image records alone, read and parsed as Read
// reads them; the layers' and containers' records are not read.
func TestImages(t *testing.T) {
	t1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		files   map[string]string
		driver  string
		want    []criorecords.Image
		wantErr string
	}{
		"the images alone": {
			files:  map[string]string{"overlay-images/images.json": imagesJSON, "overlay-layers/layers.json": "not read"},
			driver: "overlay",
			want: []criorecords.Image{
				{ID: "i-app", Names: []string{"example.com/app:1", "example.com/app@sha256:m1"}, TopLayer: "l-app", MappedTopLayers: []string{"l-app-mapped"}, BigDataNames: []string{"sha256:c1", "manifest"}, BigDataBytes: 2000, Created: t1},
				{ID: "i-scratch", Names: []string{"example.com/scratch:1"}},
			},
		},
		"one driver of two": {
			files:  map[string]string{"overlay-images/images.json": `[{"id":"o"}]`, "vfs-images/images.json": `[{"id":"v"}]`},
			driver: "vfs",
			want:   []criorecords.Image{{ID: "v"}},
		},
		"an empty file": {files: map[string]string{"overlay-images/images.json": ``}, driver: "overlay"},
		"no such driver": {
			files: map[string]string{"overlay-images/images.json": `[]`}, driver: "vfs",
			wantErr: "reading the image store's records",
		},
		"not records": {
			files: map[string]string{"overlay-images/images.json": `{}`}, driver: "overlay",
			wantErr: "overlay-images/images.json is not containers/storage's records",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := criorecords.Images(store(t, tc.files), tc.driver)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDrivers(t *testing.T) {
	for name, tc := range map[string]struct {
		files   map[string]string
		want    []string
		noStore bool
	}{
		"one":  {files: map[string]string{"overlay-images/images.json": `[]`}, want: []string{"overlay"}},
		"two":  {files: map[string]string{"overlay-images/images.json": `[]`, "vfs-images/images.json": `[]`}, want: []string{"overlay", "vfs"}},
		"none": {files: map[string]string{"overlay-layers/layers.json": `[]`}, noStore: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := criorecords.Drivers(store(t, tc.files))
			if tc.noStore != errors.Is(err, criorecords.ErrNoStore) {
				t.Fatalf("error %v, want ErrNoStore %v", err, tc.noStore)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("drivers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadBound: a records file past the bound is refused, not read.
func TestReadBound(t *testing.T) {
	root := store(t, map[string]string{"overlay-images/images.json": `[]`, "overlay-layers/layers.json": ``})
	// Sparse: 64 MiB and a byte, no disk.
	if err := os.Truncate(filepath.Join(root, "overlay-layers", "layers.json"), 64<<20+1); err != nil {
		t.Fatal(err)
	}
	if _, err := criorecords.Read(root); err == nil || !strings.Contains(err.Error(), "over 64 MiB") {
		t.Errorf("records past the bound: %v, want refused", err)
	}
}

// FuzzParse: whatever the files hold, parsing errs or makes records with
// IDs and sizes not negative, and images' exclusive bytes are within the
// store's total. The volatile layers add to the stable ones: every stable
// layer is read as without them, and a volatile one only under an ID the
// stable records lack. (Read adds only the reading of the files, bounded.)
func FuzzParse(f *testing.F) {
	f.Add([]byte(imagesJSON), []byte(layersJSON), []byte(nil), []byte(containersJSON), []byte(nil))
	f.Add([]byte(`[{"id":"i","layer":"a"}]`), []byte(`[{"id":"a","parent":"b","diff-size":1},{"id":"b","parent":"a","diff-size":2}]`),
		[]byte(`[{"id":"a","diff-size":5},{"id":"rw","parent":"a"}]`), []byte(`[{"id":"c","image":"i","layer":"a"}]`), []byte(`[{"id":"c","layer":"rw"}]`))
	f.Add([]byte(`[{"id":"i","big-data-sizes":{"a":-1}}]`), []byte(`[{"id":"x","flags":{"incomplete":1}}]`), []byte(``),
		[]byte(`[{"id":"c","metadata":"{\"pod-id\":7}"}]`), []byte(`null`))
	f.Fuzz(func(t *testing.T, images, layers, volatileLayers, containers, volatileContainers []byte) {
		r, err := criorecords.Parse("overlay", images, layers, volatileLayers, containers, volatileContainers)
		if err != nil {
			return
		}
		var ids []string
		for _, img := range r.Images {
			if img.ID == "" || img.BigDataBytes < 0 {
				t.Fatalf("image %+v", img)
			}
			ids = append(ids, img.ID)
		}
		layerIDs := map[string]bool{}
		for _, l := range r.Layers {
			if l.ID == "" || l.DiffBytes < 0 || l.CompressedBytes < 0 || layerIDs[l.ID] {
				t.Fatalf("layer %+v", l)
			}
			layerIDs[l.ID] = true
		}
		stable, err := criorecords.Parse("overlay", images, layers, nil, nil, nil)
		if err != nil {
			t.Fatalf("the files parse with the volatile layers, not without: %v", err)
		}
		if diff := cmp.Diff(stable.Layers, r.Layers[:len(stable.Layers)]); diff != "" {
			t.Fatalf("stable layers read otherwise beside volatile ones (-alone +beside):\n%s", diff)
		}
		for _, l := range r.Layers[len(stable.Layers):] {
			if !l.Volatile {
				t.Fatalf("layer %+v after the stable ones, not volatile", l)
			}
		}
		for _, c := range r.Containers {
			if c.ID == "" {
				t.Fatalf("container %+v", c)
			}
		}
		all := r.Bytes(criorecords.HeldBy(r, nil, nil))
		for _, set := range [][]string{ids, ids[:len(ids)/2]} {
			if n := criorecords.Exclusive(r, set); n < 0 || n > all {
				t.Fatalf("exclusive bytes of %v: %d, want within 0 and %d", set, n, all)
			}
		}
	})
}
