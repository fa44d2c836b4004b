//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// The worker tier on a real CRI-O: the scenarios the
// containerd tier runs, against CRI-O's own image store, pinning and pause
// image. CRI-O has no import: the images are pulled, as on a real node,
// from a loopback registry (testcrio), so each has a repository digest.

const (
	crioPinned  = "example.com/pinned:1"
	crioCreated = "example.com/created:1"
	// crioShort is listed by its short name, as a user writes it.
	crioShort     = "docker.io/library/shortname:1"
	crioShortName = "shortname:1"
)

// crioNode is a CRI-O seeded with the containerd tier's images, plus one
// pinned by pinned_images and one named by a short name.
type crioNode struct {
	*testcrio.CRIO
	ids map[string]string
}

func seedCRIO(t *testing.T) *crioNode {
	t.Helper()
	testcrio.Require(t)
	c := testcrio.Start(t, testcrio.WithPinnedImages(crioPinned))
	c.Import(t, seedImages(t, []string{crioCreated}, []string{crioPinned, crioShort})...)
	c.RunContainer(t, "running", runImage)
	c.CreateContainer(t, "created", crioCreated)
	pod, _ := c.RunContainer(t, "exited", exitedImage)
	c.StopPod(t, pod)
	return &crioNode{CRIO: c, ids: c.ImageIDs(t)}
}

// present is the node's tags (not its digests or IDs; CRI-O's IDs are bare
// hex, without containerd's "sha256:").
func (n *crioNode) present(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for ref, id := range n.ImageIDs(t) {
		if ref != id && !strings.Contains(ref, "@") {
			out[ref] = true
		}
	}
	return out
}

// crioKept is what every automatic removal leaves on the seeded node:
// excluded, used by containers (running, exited and created), pinned by CRI-O's
// configuration, and its pause image.
var crioKept = map[string]bool{keepExact: true, keepWildcard: true, runImage: true, exitedImage: true, crioCreated: true, crioPinned: true, testcrio.SandboxImage: true}

// TestCRIORemoverImageList: an ImageList's entries in every form, short
// names included; protected images stay whatever the list says.
func TestCRIORemoverImageList(t *testing.T) {
	n := seedCRIO(t)
	byRepoDigest := n.RepoDigest(t, junkC)
	_, bareDigest, _ := strings.Cut(n.RepoDigest(t, junkD), "@")
	list := imageListFile(t,
		appImage, byRepoDigest, bareDigest, n.ids[junkA], strings.TrimPrefix(n.ids[junkB], "sha256:"), crioShortName,
		"example.com/ghost:1", keepExact, keepWildcard, runImage, exitedImage, crioCreated, crioPinned, testcrio.SandboxImage)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runWorker(t, ctx, "remover", "--imagelist="+list, "--runtime-endpoint="+n.Endpoint,
		"--exclusion-dir="+workertest.ExclusionDir(t, keepExact, "example.com/protected/*"))
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	want := map[string]int{"removed": 6, "not on node": 1, "excluded": 2, "in use": 3, "pinned": 2}
	if diff := cmp.Diff(want, r.Summary.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s\n%s", diff, r.Stderr)
	}
	if diff := cmp.Diff(crioKept, n.present(t)); diff != "" {
		t.Errorf("images left (-want +got):\n%s", diff)
	}
}

// TestCRIOPipelinePruneAll: "*" through the collector and the remover as
// two processes, as in a scheduled worker pod with scanning off.
func TestCRIOPipelinePruneAll(t *testing.T) {
	n := seedCRIO(t)
	excl := workertest.ExclusionDir(t, keepExact, "example.com/protected/*")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	collector, remover := pipeline(t, ctx, n.Endpoint, workertest.SharedDir(t), excl, true)
	if collector.Summary.Counts["candidates"] != 6 || remover.Summary.Counts["removed"] != 6 {
		t.Errorf("collector counts %v, remover counts %v: want 6 candidates, all removed", collector.Summary.Counts, remover.Summary.Counts)
	}
	if diff := cmp.Diff(crioKept, n.present(t)); diff != "" {
		t.Errorf("images left (-want +got):\n%s", diff)
	}
}

// TestCRIONodeCommand: eraser node list -o json on CRI-O explains each
// image as on containerd, the pinned and pause images included; prune -o
// json removes what it may and says why it kept the rest.
func TestCRIONodeCommand(t *testing.T) {
	n := seedCRIO(t)
	cmd := exec.Command(filepath.Join(bin, "eraser"), "node", "list", "-o", "json", "--runtime-endpoint="+n.Endpoint)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("eraser node list: %v", err)
	}
	var images []struct {
		Names   []string `json:"names"`
		Verdict string   `json:"verdict"`
		Detail  string   `json:"detail"`
	}
	if err := json.Unmarshal(out, &images); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	got := map[string]string{}
	for _, img := range images {
		for _, name := range img.Names {
			if !strings.Contains(name, "@") {
				got[name] = img.Verdict
			}
		}
	}
	for name, want := range map[string]string{junkA: "removable", runImage: "in use", exitedImage: "in use", crioCreated: "in use",
		crioPinned: "pinned", testcrio.SandboxImage: "pinned"} {
		if got[name] != want {
			t.Errorf("%s: verdict %q, want %q (all: %v)", name, got[name], want, got)
		}
	}

	// prune, as a script would call it.
	prune := exec.Command(filepath.Join(bin, "eraser"), "node", "prune", "--images="+junkA+","+runImage+","+crioPinned, "-o", "json",
		"--runtime-endpoint="+n.Endpoint, "--state-dir="+t.TempDir(), "--min-age=0s")
	out, err = prune.Output()
	if err != nil {
		t.Fatalf("eraser node prune: %v\n%s", err, out)
	}
	var pruned struct {
		Results []struct {
			Target  string `json:"target"`
			Outcome string `json:"outcome"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &pruned); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	outcomes := map[string]string{}
	for _, r := range pruned.Results {
		outcomes[r.Target] = r.Outcome
	}
	if diff := cmp.Diff(map[string]string{junkA: "removed", runImage: "in use", crioPinned: "pinned"}, outcomes); diff != "" {
		t.Errorf("prune outcomes (-want +got):\n%s", diff)
	}
	if n.present(t)[junkA] {
		t.Errorf("%s still on the node after prune", junkA)
	}
}

// TestCRIOImageAgeFromTheStore: CRI-O's CRI tells no pull
// times, but its image store records them. A month after the pull, the
// first run on the node (a fresh state directory) with a minimum age of a
// week removes the unused images when it reads the store, as the pod spec
// has it on CRI-O; without the store, ages count from first sight and the
// same run removes nothing.
func TestCRIOImageAgeFromTheStore(t *testing.T) {
	n := seedCRIO(t)
	monthLater := time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	excl := workertest.ExclusionDir(t, keepExact, "example.com/protected/*")
	run := func(extra ...string) run {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := append([]string{"--imagelist=" + imageListFile(t, "*"), "--runtime-endpoint=" + n.Endpoint, "--exclusion-dir=" + excl,
			"--min-age=168h", "--now=" + monthLater, "--dry-run"}, extra...)
		r := runWorker(t, ctx, "remover", args...)
		if r.Code != 0 {
			t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
		}
		return r
	}
	firstSight := run()
	if firstSight.Summary.AgeSource != "first seen" || firstSight.Summary.Counts["removed"] != 0 || firstSight.Summary.Counts["too young"] != 6 {
		t.Errorf("without the store: age source %q, counts %v; want first seen, 6 too young", firstSight.Summary.AgeSource, firstSight.Summary.Counts)
	}
	store := run("--image-store=" + n.RootDir())
	if store.Summary.AgeSource != "runtime" || store.Summary.Counts["removed"] != 6 {
		t.Errorf("with the store: age source %q, counts %v; want runtime, 6 removed (a dry run)\n%s", store.Summary.AgeSource, store.Summary.Counts, store.Stderr)
	}
}

// TestCRIOUnusedForAcrossRuns: unusedFor on CRI-O, as on containerd
// (TestUnusedForAcrossRuns): a use seen at one run outlives its container
// and is what the policy judges at the next runs.
func TestCRIOUnusedForAcrossRuns(t *testing.T) {
	n := seedCRIO(t)
	ctx := context.Background()
	pod, _ := n.RunContainer(t, "job", appImage)
	day0 := time.Now().Add(time.Hour)
	policy := []string{"--state-dir=" + t.TempDir(), "--min-age=1m", "--unused-for=720h", "--image-store=" + n.RootDir(),
		"--exclusion-dir=" + workertest.ExclusionDir(t, keepExact, "example.com/protected/*")}
	at := func(days int) []string {
		return append([]string{rfc3339(day0.Add(time.Duration(days) * 24 * time.Hour))}, policy...)
	}
	_, rm := scheduled(t, ctx, n.Endpoint, at(0))
	if rm.Summary.Counts["removed"] != 0 || rm.Summary.Counts["recently used"] != 5 || rm.Summary.AgeSource != "runtime" {
		t.Fatalf("day 0: %+v\n%s", rm.Summary, rm.Stderr)
	}
	n.RemovePod(t, pod)
	if _, rm = scheduled(t, ctx, n.Endpoint, at(20)); rm.Summary.Counts["removed"] != 0 || !n.present(t)[appImage] {
		t.Fatalf("day 20: %+v\n%s", rm.Summary, rm.Stderr)
	}
	_, rm = scheduled(t, ctx, n.Endpoint, at(31))
	got := n.present(t)
	if got[appImage] || got[junkA] || rm.Summary.RemovedBy["UnusedFor"].Images < 6 {
		t.Fatalf("day 31: present %v, summary %+v\n%s", got, rm.Summary, rm.Stderr)
	}
	for image := range crioKept {
		if !got[image] {
			t.Errorf("day 31: %s, which is protected, was removed", image)
		}
	}
}

// TestCRIODiskPressure: the disk-pressure scenario (TestDiskPressure) with
// CRI-O's image store on a small tmpfs, measured where the runtime reports
// its image filesystem, ages from the store.
func TestCRIODiskPressure(t *testing.T) {
	testcrio.Require(t)
	// 48 MiB: CRI-O keeps one copy of each layer (containerd two: the blob
	// and its snapshot), so the same images fill the same share.
	c := testcrio.Start(t, testcrio.WithSmallDisk(48))
	n := &crioNode{CRIO: c}
	diskPressure(t, diskNode{endpoint: c.Endpoint, root: c.RootDir(), args: []string{"--image-store=" + c.RootDir()},
		importI: func(img testcontainerd.Image) { c.Import(t, img) }, present: func() map[string]bool { return n.present(t) }})
}
