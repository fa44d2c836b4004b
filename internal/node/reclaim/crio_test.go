//go:build linux && (!cgo || exclude_graphdriver_btrfs)

package reclaim_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.podman.io/storage"
	"go.podman.io/storage/pkg/reexec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/wait"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// layerTar is a layer's diff: size random bytes, and a directory only its
// owner (not root) may enter, as images ship them: its deletion needs
// CAP_DAC_OVERRIDE.
func layerTar(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*tar.Header{
		{Name: "home/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "home/user/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: 1000, Gid: 1000},
		{Name: "home/user/data.bin", Typeflag: tar.TypeReg, Mode: 0o600, Uid: 1000, Gid: 1000, Size: int64(size)},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func putLayer(t *testing.T, st storage.Store, parent string, size int) string {
	t.Helper()
	l, _, err := st.PutLayer("", parent, nil, "", false, nil, bytes.NewReader(layerTar(t, size)))
	if err != nil {
		t.Fatal(err)
	}
	return l.ID
}

// TestReclaimOnCRIO: each kind of CRI-O leftover made in a real CRI-O's
// store through containers/storage, found and reclaimed by the policy,
// through containers/storage too, while CRI-O runs; kept by the re-check
// and by the store's own checks: a layer a new image stands on, a layer
// another layer was put on, between the finding and the deletion; an
// orphan's root filesystem mounted; the storage of the containers CRI-O
// lists. CRI-O then pulls, runs and removes as before: it re-read what
// changed under it.
func TestReclaimOnCRIO(t *testing.T) {
	c := testcrio.Start(t, testcrio.WithSmallDisk(256))
	ctx := context.Background()
	kept := image(t, "example.com/reclaim/crio-kept:1", 4*mib)
	held := image(t, "example.com/reclaim/crio-held:1", 3*mib)
	mountedImg := image(t, "example.com/reclaim/crio-mounted:1", 1*mib)
	c.Import(t, kept, held, mountedImg)
	ids := c.ImageIDs(t)
	podID, ctrID := c.RunContainer(t, "live", kept.Tags[0])

	st := c.Store(t)
	// An unreferenced chain: an interrupted removal's two layers.
	lower := putLayer(t, st, "", 6*mib)
	upper := putLayer(t, st, lower, 2*mib)
	// Taken up between the finding and the deletion, by an image and by
	// a pull that put a layer on it.
	takenByImage := putLayer(t, st, "", 1*mib)
	takenByLayer := putLayer(t, st, "", 1*mib)
	incomplete := putLayer(t, st, "", 2*mib)
	// An orphan: storage CRI-O made for a container it no longer lists.
	orphan := testcrio.Orphan(t, st, c.RootDir(), "k8s_gone_orphan", strings.TrimPrefix(ids[held.Tags[0]], "sha256:"), 3*mib)
	mounted := testcrio.Orphan(t, st, c.RootDir(), "k8s_gone_mounted", strings.TrimPrefix(ids[mountedImg.Tags[0]], "sha256:"), 0)
	if _, err := st.Mount(mounted.ID, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = st.Unmount(mounted.ID, true) })

	// Flagged last: the store's next write deletes what is flagged.
	testcrio.MarkIncomplete(t, c.RootDir(), incomplete)
	client := c.Client(t)
	found, err := reclaim.Find(ctx, client, c.RootDir(), reclaim.Ages{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foundKinds := map[string]leftoverkind.Kind{}
	for _, l := range found {
		id, _, _ := strings.Cut(l.Name, " ")
		foundKinds[id] = l.Kind
	}
	wantFound := map[string]leftoverkind.Kind{
		lower: leftoverkind.UnreferencedLayer, upper: leftoverkind.UnreferencedLayer,
		takenByImage: leftoverkind.UnreferencedLayer, takenByLayer: leftoverkind.UnreferencedLayer,
		incomplete: leftoverkind.IncompleteLayer, orphan.ID: leftoverkind.OrphanContainer, mounted.ID: leftoverkind.OrphanContainer,
	}
	if diff := cmp.Diff(wantFound, foundKinds); diff != "" {
		t.Fatalf("leftovers found (-want +got):\n%s", diff)
	}

	if _, err := st.CreateImage("", []string{"example.com/reclaim/took-a-layer:1"}, takenByImage, "", nil); err != nil {
		t.Fatal(err)
	}
	newChild := putLayer(t, st, takenByLayer, 1*mib)
	if _, err := st.CreateImage("", []string{"example.com/reclaim/pulled-on-a-layer:1"}, newChild, "", nil); err != nil {
		t.Fatal(err)
	}
	usedBefore := used(t, c.RootDir())

	policy := reclaim.Policy{
		Kinds: map[leftoverkind.Kind]bool{leftoverkind.UnreferencedLayer: true, leftoverkind.IncompleteLayer: true, leftoverkind.OrphanContainer: true},
		CRIO:  crioStore(c, 0),
	}
	if dry := reclaim.Run(ctx, client, client, found, policy, true); len(dry) != len(found) || reclaim.Sum(dry).Count[reclaim.WouldReclaim] != len(found) {
		t.Errorf("dry run: %+v, want every leftover would be reclaimed", dry)
	}
	got := map[string]string{}
	var freed uint64
	for _, r := range runAsPod(t, c.CRIEndpoint(), found, policy) {
		id, _, _ := strings.Cut(r.Name, " ")
		got[id] = string(r.Outcome)
		// The incomplete layer went at the store's first write after the
		// finding (the races'), before usedBefore.
		if r.Outcome == reclaim.Reclaimed && r.Kind != leftoverkind.IncompleteLayer {
			freed += r.Bytes
		}
		t.Logf("%s %s: %s %s (%s)", r.Kind, r.Name, r.Outcome, r.Detail, r.Why)
	}
	want := map[string]string{
		lower: "reclaimed", upper: "reclaimed", incomplete: "reclaimed", orphan.ID: "reclaimed",
		takenByImage: "kept", takenByLayer: "kept", mounted.ID: "kept",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}

	// What was reclaimed is gone from the records and the disk; what was
	// kept is there, and no longer a leftover but the mounted orphan.
	after, err := reclaim.Find(ctx, client, c.RootDir(), reclaim.Ages{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, l := range after {
		id, _, _ := strings.Cut(l.Name, " ")
		left = append(left, id)
	}
	if diff := cmp.Diff([]string{mounted.ID}, left); diff != "" {
		t.Errorf("leftovers after reclaiming (-want +got):\n%s", diff)
	}
	for _, id := range []string{lower, upper, incomplete, orphan.LayerID} {
		if dir, err := criorecords.LayerDir(c.RootDir(), "overlay", id); err == nil {
			if _, err := os.Stat(filepath.Dir(dir)); err == nil {
				t.Errorf("layer %s's directory is still there", id)
			}
		}
	}
	for _, id := range []string{takenByImage, takenByLayer, newChild} {
		if _, err := st.Layer(id); err != nil {
			t.Errorf("layer %s, taken up, is gone: %v", id, err)
		}
	}
	usedAfter := used(t, c.RootDir())
	gain := int64(usedBefore) - int64(usedAfter)
	t.Logf("image filesystem: %d bytes used before, %d after: %d freed; the reclaimed leftovers held %d", usedBefore, usedAfter, gain, freed)
	if d := float64(gain) - float64(freed); d > 0.05*float64(freed) || -d > 0.05*float64(freed) {
		t.Errorf("the image filesystem gained %d bytes, the leftovers reclaimed held %d: more than 5%% apart", gain, freed)
	}

	// CRI-O goes on: the live container runs, the image the orphan held
	// goes, a new image comes and runs.
	status, err := c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctrID})
	if err != nil || status.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("the live container: %v, %v", status.GetStatus().GetState(), err)
	}
	if _, err := c.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ids[held.Tags[0]]}}); err != nil {
		t.Errorf("removing the image the orphan held: %v", err)
	}
	c.Import(t, image(t, "example.com/reclaim/crio-after:1", 1*mib))
	_, afterCtr := c.RunContainer(t, "after", "example.com/reclaim/crio-after:1")
	if afterCtr == "" {
		t.Error("no container runs after reclaiming")
	}
	c.RemovePod(t, podID)
}

// TestMain lets containers/storage re-execute the test binary, which it
// does to unpack the layers the tests put in CRI-O's store, and runs the
// reclaiming child of runAsPod.
func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	if os.Getenv(childEnv) != "" {
		os.Exit(reclaimChild())
	}
	os.Exit(m.Run())
}

const childEnv = "ERASER_RECLAIM_CHILD"

// childOrder is what runAsPod hands its child.
type childOrder struct {
	Endpoint string
	Found    []leftover.Leftover
	Kinds    []leftoverkind.Kind
	CRIO     reclaim.CRIOStore
}

// runAsPod reclaims in a child process holding what the remover's
// container holds where it reclaims on CRI-O: root with the pod spec's
// capabilities alone, no new privileges.
func runAsPod(t *testing.T, endpoint string, found []leftover.Leftover, p reclaim.Policy) []reclaim.Result {
	t.Helper()
	order := childOrder{Endpoint: endpoint, Found: found, CRIO: p.CRIO}
	for k := range p.Kinds {
		order.Kinds = append(order.Kinds, k)
	}
	data, err := json.Marshal(order)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append(workertest.AsContainer(podpaths.CRIOReclaimCapabilities), os.Args[0])
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+string(data))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the reclaiming child (%v): %v\n%s", argv, err, stderr.String())
	}
	var results []reclaim.Result
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("the reclaiming child's results: %v\n%s\n%s", err, out, stderr.String())
	}
	return results
}

func reclaimChild() int {
	var order childOrder
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &order); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	client, err := cri.Dial(ctx, order.Endpoint, cri.DefaultTimeouts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Close()
	p := reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{}, CRIO: order.CRIO}
	for _, k := range order.Kinds {
		p.Kinds[k] = true
	}
	if err := json.NewEncoder(os.Stdout).Encode(reclaim.Run(ctx, client, client, order.Found, p, false)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// crioStore is the store of c as the remover is told of it, with c's own
// configuration files (storageConf: a storage.conf, which CRI-O's
// instance has none of unless a test writes it).
func crioStore(c *testcrio.CRIO, recordAge time.Duration) reclaim.CRIOStore {
	return reclaim.CRIOStore{GraphRoot: c.RootDir(), RunRoot: filepath.Join(c.Dir, "run"),
		StorageConf: filepath.Join(c.Dir, "storage.conf"), CRIOConf: c.ConfigFile(), RecordAge: recordAge}
}

// TestReclaimNeverRacesAPull: two pulls held in the middle by the
// registry, one with its first layers committed and its last blob still
// arriving, one that will reuse an old layer nothing holds (containers/image
// finds it by its contents) once its first blob arrives. Found with a
// record age of a second (compressed time: every layer the pulls wrote
// is older), the layers nothing holds are kept while the pulls are under
// way; released, both pulls complete and a container of the first runs.
func TestReclaimNeverRacesAPull(t *testing.T) {
	c := testcrio.Start(t)
	ctx := context.Background()
	st := c.Store(t)

	reusedTar := layerTar(t, 1*mib)
	old, _, err := st.PutLayer("", "", nil, "", false, nil, bytes.NewReader(reusedTar))
	if err != nil {
		t.Fatal(err)
	}
	slow, err := image(t, "example.com/reclaim/slow-pull:1", 1*mib).Build()
	if err != nil {
		t.Fatal(err)
	}
	last, err := testimage.Layer(layerTar(t, 1*mib))
	if err != nil {
		t.Fatal(err)
	}
	if slow, err = mutate.AppendLayers(slow, last); err != nil {
		t.Fatal(err)
	}
	// An OCI image of uncompressed layers: the reused one's blob is its
	// contents, which containers/image looks layers up by.
	first := static.NewLayer(layerTar(t, 1*mib), types.OCIUncompressedLayer)
	reusing, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON),
		first, static.NewLayer(reusedTar, types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := reusing.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if reusing, err = mutate.ConfigFile(reusing, cf); err != nil {
		t.Fatal(err)
	}
	refs := c.Publish(t, testcrio.Tagged{Image: slow, Tags: []string{"example.com/reclaim/slow-pull:1"}},
		testcrio.Tagged{Image: reusing, Tags: []string{"example.com/reclaim/reusing-pull:1"}})
	var releases []func()
	for _, l := range []v1.Layer{last, first} {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, c.HoldBlob(t, d.String()))
	}
	before, err := criorecords.Read(c.RootDir())
	if err != nil {
		t.Fatal(err)
	}
	pulls := make(chan error, len(refs))
	for _, ref := range refs {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			_, err := c.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			pulls <- err
		}()
	}
	// The slow pull commits the layers before its held one.
	var committed []string
	wait.For(t, time.Minute, "the slow pull to commit a layer", func() bool {
		r, err := criorecords.Read(c.RootDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range r.Layers {
			if !slices.ContainsFunc(before.Layers, func(b criorecords.Layer) bool { return b.ID == l.ID }) {
				committed = append(committed, l.ID)
			}
		}
		return len(committed) > 0
	})
	time.Sleep(1100 * time.Millisecond)

	client := c.Client(t)
	found, err := reclaim.Find(ctx, client, c.RootDir(), reclaim.Ages{Record: time.Second}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	judged := map[string]bool{}
	for _, l := range found {
		judged[l.Name] = true
	}
	for _, id := range append([]string{old.ID}, committed...) {
		if !judged[id] {
			t.Fatalf("layer %s is not among the leftovers found (%+v): the test holds no pull's layer", id, found)
		}
	}
	policy := reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.UnreferencedLayer: true}, CRIO: crioStore(c, time.Second)}
	for _, r := range runAsPod(t, c.CRIEndpoint(), found, policy) {
		t.Logf("%s %s: %s %s", r.Kind, r.Name, r.Outcome, r.Detail)
		if r.Kind == leftoverkind.UnreferencedLayer && (r.Outcome != reclaim.Kept || !strings.Contains(r.Detail, "pull is under way")) {
			t.Errorf("%s: %s %q, want kept: a pull is under way", r.Name, r.Outcome, r.Detail)
		}
	}

	for _, release := range releases {
		release()
	}
	for range refs {
		if err := <-pulls; err != nil {
			t.Errorf("a pull held while reclaiming failed: %v", err)
		}
	}
	if _, ctr := c.RunContainer(t, "pulled", refs[0]); ctr == "" {
		t.Error("no container of the pulled image runs")
	}
}

// TestReclaimRefusesAStoreItDoesNotKnow: a node's storage.conf with
// transient_store, records with a field this build's containers/storage
// does not know, and incomplete layers the policy does not take each keep
// the store closed, the reason in the report, its records untouched.
func TestReclaimRefusesAStoreItDoesNotKnow(t *testing.T) {
	c := testcrio.Start(t)
	ctx := context.Background()
	st := c.Store(t)
	layersJSON := filepath.Join(c.RootDir(), "overlay-layers", "layers.json")
	for name, tc := range map[string]struct {
		storageConf string
		newField    bool
		incomplete  bool
		want        string
	}{
		"transient store":                 {storageConf: "[storage]\ntransient_store = true\n", want: "transient_store"},
		"records from a newer library":    {newField: true, want: `"x-new"`},
		"incomplete layers not reclaimed": {incomplete: true, want: "incomplete"},
	} {
		t.Run(name, func(t *testing.T) {
			conf := filepath.Join(c.Dir, "storage.conf")
			if err := os.WriteFile(conf, []byte(tc.storageConf), 0o644); err != nil {
				t.Fatal(err)
			}
			// Each case's own: a case on a build that reclaims it leaves the
			// next none.
			putLayer(t, st, "", 1*mib)
			if tc.incomplete {
				testcrio.MarkIncomplete(t, c.RootDir(), putLayer(t, st, "", 1*mib))
			}
			if tc.newField {
				data, err := os.ReadFile(layersJSON)
				if err != nil {
					t.Fatal(err)
				}
				// The other cases find the records as CRI-O wrote them.
				t.Cleanup(func() {
					if err := os.WriteFile(layersJSON, data, 0o600); err != nil {
						t.Error(err)
					}
				})
				var records []map[string]any
				if err := json.Unmarshal(data, &records); err != nil {
					t.Fatal(err)
				}
				for _, r := range records {
					r["x-new"] = 1
				}
				if data, err = json.Marshal(records); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(layersJSON, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before, err := os.ReadFile(layersJSON)
			if err != nil {
				t.Fatal(err)
			}
			found, err := reclaim.Find(ctx, c.Client(t), c.RootDir(), reclaim.Ages{}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(found) == 0 {
				t.Fatal("no leftover found")
			}
			policy := reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.UnreferencedLayer: true}, CRIO: crioStore(c, 0)}
			for _, r := range runAsPod(t, c.CRIEndpoint(), found, policy) {
				t.Logf("%s %s: %s %s", r.Kind, r.Name, r.Outcome, r.Detail)
				if r.Kind == leftoverkind.UnreferencedLayer && (r.Outcome != reclaim.Failed || !strings.Contains(r.Detail, tc.want)) {
					t.Errorf("%s: %s %q, want refused naming %s", r.Name, r.Outcome, r.Detail, tc.want)
				}
			}
			after, err := os.ReadFile(layersJSON)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Errorf("layers.json changed:\n%s\n%s", before, after)
			}
		})
	}
}
