//go:build linux

// Package e2e runs the real worker binaries (collector, remover, eraser)
// against a real containerd and a real CRI-O, as separate processes handing
// off over real FIFOs, the way a worker pod runs them.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// bin is the directory of the workers, the node command and the example
// scanner, as released.
var bin string

func TestMain(m *testing.M) {
	workers := gobuild.New("cmd/collector", "cmd/remover", "cmd/eraser", "examples/scanner")
	dir, err := workers.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building workers:", err)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	workers.Remove()
	os.Exit(code)
}

// node is a containerd seeded with the images every scenario uses, for
// the scenarios that need containerd itself (its tools, its crashes).
type node struct {
	*testcontainerd.Containerd
	ids map[string]string // tag -> image ID
}

const (
	appImage     = "example.com/app:1"
	appAlias     = "example.com/app:latest"
	junkA        = "example.com/junk/a:1"
	junkB        = "example.com/junk/b:1"
	junkC        = "example.com/junk/c:1"
	junkD        = "example.com/junk/d:1"
	keepExact    = "example.com/keep/exact:1"
	keepWildcard = "example.com/protected/w:2"
	runImage     = "example.com/run:1"
	exitedImage  = "example.com/exited:1"
)

// seedImages are the images every scenario's node holds: runnable ones
// (a container can start from them) and junk, with the extra images given.
func seedImages(t *testing.T, runnableExtra, junkExtra []string) []testimage.Image {
	t.Helper()
	pause := testimage.Pause(t)
	runnable := func(tags ...string) testimage.Image {
		return testimage.Image{Tags: tags, Files: map[string][]byte{"pause": pause}, Entrypoint: []string{"/pause"}, RandomBytes: 1024}
	}
	junk := func(tag string) testimage.Image {
		return testimage.Image{Tags: []string{tag}, RandomBytes: 4096}
	}
	out := []testimage.Image{runnable(appImage, appAlias), junk(junkA), junk(junkB), junk(junkC), junk(junkD),
		junk(keepExact), junk(keepWildcard), runnable(runImage), runnable(exitedImage)}
	for _, tag := range runnableExtra {
		out = append(out, runnable(tag))
	}
	for _, tag := range junkExtra {
		out = append(out, junk(tag))
	}
	return out
}

func seed(t *testing.T) *node {
	t.Helper()
	c := testcontainerd.Start(t)
	c.Import(t, seedImages(t, nil, nil)...)
	c.RunContainer(t, "running", runImage)
	pod, _ := c.RunContainer(t, "exited", exitedImage)
	c.StopPod(t, pod)
	return &node{Containerd: c, ids: c.ImageIDs(t)}
}

func (n *node) present(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for tag := range n.ImageIDs(t) {
		if !strings.HasPrefix(tag, "sha256:") {
			out[tag] = true
		}
	}
	return out
}

type run = workertest.Run

func runWorker(t *testing.T, ctx context.Context, name string, args ...string) run {
	t.Helper()
	return workertest.Worker(t, ctx, filepath.Join(bin, name), args...)
}

// pipeline runs the collector and the remover on the runtime at endpoint as
// two processes sharing dir, as in a worker pod, and fails the test unless
// both exit 0. exclusionDir ("" for none) goes to both, as the pod spec
// passes it to every worker.
func pipeline(t *testing.T, ctx context.Context, endpoint, dir, exclusionDir string, scanDisabled bool) (collector, remover run) {
	t.Helper()
	collector, remover = pipelineRun(t, ctx, endpoint, dir, exclusionDir, scanDisabled)
	if collector.Code != 0 || remover.Code != 0 {
		t.Fatalf("collector exit %d, remover exit %d\ncollector:\n%s\nremover:\n%s", collector.Code, remover.Code, collector.Stderr, remover.Stderr)
	}
	return collector, remover
}

// pipelineRun is pipeline without judging the exit codes.
func pipelineRun(t *testing.T, ctx context.Context, endpoint, dir, exclusionDir string, scanDisabled bool, extra ...string) (collector, remover run) {
	t.Helper()
	args := []string{"--runtime-endpoint=" + endpoint, "--shared-dir=" + dir}
	if exclusionDir != "" {
		args = append(args, "--exclusion-dir="+exclusionDir)
	}
	collectorArgs := args
	// The pod spec tells the remover what it tells the collector.
	removerArgs := append(append([]string{}, args...), "--scanner=enabled")
	if scanDisabled {
		collectorArgs = append(append([]string{}, args...), "--scan-disabled")
		removerArgs = append(append([]string{}, args...), "--scanner=disabled")
	}
	var wg sync.WaitGroup
	wg.Go(func() { collector = runWorker(t, ctx, "collector", collectorArgs...) })
	remover = runWorker(t, ctx, "remover", append(removerArgs, extra...)...)
	wg.Wait()
	return collector, remover
}

func imageListFile(t *testing.T, entries ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "images")
	data, _ := json.Marshal(entries)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRemoverImageList: an ImageList's entries in every form, short
// names included; protected images stay whatever the list says.
func TestRemoverImageList(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		byRepoDigest := n.RepoDigest(t, junkC)
		_, bareDigest, _ := strings.Cut(n.RepoDigest(t, junkD), "@")
		list := append([]string{
			appImage,     // by tag: removes both tags of the image
			byRepoDigest, // by repo@digest
			bareDigest,   // by the digest part of a repo digest
			n.ids[junkA], // by image ID
			strings.TrimPrefix(n.ids[junkB], "sha256:"), // by bare ID
			shortName,               // by short name
			"example.com/ghost:1",   // not on node
			keepExact, keepWildcard, // excluded
			runImage, exitedImage, createdImage, // used by containers
		}, n.pinned()...) // the sandbox image, and what the runtime's configuration pins
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, list...), "--runtime-endpoint="+n.CRIEndpoint(),
			"--exclusion-dir="+workertest.ExclusionDir(t, keepExact, "example.com/protected/*"))
		if r.Code != 0 {
			t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
		}
		want := map[string]int{"removed": n.removable, "not on node": 1, "excluded": 2, "in use": 3, "pinned": len(n.pinned())}
		if diff := cmp.Diff(want, r.Summary.Counts); diff != "" {
			t.Errorf("counts (-want +got):\n%s\n%s", diff, r.Stderr)
		}
		if r.Summary.BytesFreed == 0 {
			t.Error("no bytes freed reported")
		}
		present := n.present(t)
		for _, gone := range []string{appImage, appAlias, junkA, junkB, junkC, junkD, shortImage} {
			if present[gone] {
				t.Errorf("%s is still on the node", gone)
			}
		}
		if diff := cmp.Diff(n.kept, present); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
		for _, outcome := range []string{`"outcome":"removed"`, `"outcome":"in use"`, `"outcome":"pinned"`, `"outcome":"excluded"`, `"outcome":"not on node"`} {
			if !strings.Contains(r.Stderr, outcome) {
				t.Errorf("no log line with %s", outcome)
			}
		}
	})
}

// TestRemoverPruneAll: "*" removes every unused, unprotected image.
func TestRemoverPruneAll(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.CRIEndpoint(),
			"--exclusion-dir="+workertest.ExclusionDir(t, keepExact, "example.com/protected/*"))
		if r.Code != 0 {
			t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
		}
		if diff := cmp.Diff(n.kept, n.present(t)); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
	})
}

func TestRemoverDryRun(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		before := n.present(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r := runWorker(t, ctx, "remover", "--dry-run", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.CRIEndpoint())
		// Without exclusions the two excluded images are removable too.
		if r.Code != 0 || !r.Summary.DryRun || r.Summary.Counts["removed"] != n.removable+2 || r.Summary.BytesFreed == 0 {
			t.Fatalf("exit %d, summary %+v\n%s", r.Code, r.Summary, r.Stderr)
		}
		if diff := cmp.Diff(before, n.present(t)); diff != "" {
			t.Errorf("a dry run changed the node (-before +after):\n%s", diff)
		}
	})
}

// TestRemoverRefusesBadInput: set-up errors end the run before anything is
// removed, with the reason in the log and the summary.
func TestRemoverRefusesBadInput(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		before := n.present(t)
		cases := map[string]struct {
			args []string
			want string
		}{
			"socket missing":      {args: []string{"--imagelist=" + imageListFile(t, "*"), "--runtime-endpoint=unix:///nonexistent/cri.sock"}, want: "runtime socket /nonexistent/cri.sock"},
			"bad exclusion":       {args: []string{"--imagelist=" + imageListFile(t, "*"), "--runtime-endpoint=" + n.CRIEndpoint(), "--exclusion-dir=" + upstreamRefusedList(t)}, want: "l.json: want"},
			"image list not JSON": {args: []string{"--imagelist=" + writeFile(t, "alpine"), "--runtime-endpoint=" + n.CRIEndpoint()}, want: "not a JSON array"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				r := runWorker(t, ctx, "remover", tc.args...)
				if r.Code != 1 || !strings.Contains(r.Stderr, tc.want) || !strings.Contains(r.Summary.Error, tc.want) {
					t.Errorf("exit %d, summary error %q; want 1 and %q in log and summary:\n%s", r.Code, r.Summary.Error, tc.want, r.Stderr)
				}
			})
		}
		if diff := cmp.Diff(before, n.present(t)); diff != "" {
			t.Errorf("images changed (-before +after):\n%s", diff)
		}
	})
}

// upstreamRefusedList is an exclusion directory whose list upstream's
// worker refused too: the key it read is no document.
func upstreamRefusedList(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "exclude-l"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "exclude-l", "l.json"), []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPipelineScanDisabled: collector → remover over real FIFOs, as two
// processes sharing a directory, as in a worker pod with scanning off.
func TestPipelineScanDisabled(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		excl := workertest.ExclusionDir(t, keepExact, "example.com/protected/*")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		collector, remover := pipeline(t, ctx, n.CRIEndpoint(), workertest.SharedDir(t), excl, true)
		if collector.Summary.Counts["candidates"] != n.removable {
			t.Errorf("collector counts %v, want %d candidates", collector.Summary.Counts, n.removable)
		}
		if remover.Summary.Counts["removed"] != n.removable {
			t.Errorf("remover counts %v, want %d removed", remover.Summary.Counts, n.removable)
		}
		if diff := cmp.Diff(n.kept, n.present(t)); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
	})
}

// TestPipelineWithScanner: collector and remover processes with a scanner in
// between, played by this test through the hand-off API as a custom scanner
// would: it keeps one candidate, and must be told when removal is done.
func TestPipelineWithScanner(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		shared := workertest.SharedDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		scanErr := make(chan error, 1)
		go func() {
			scanErr <- playScanner(ctx, shared, only(func(img handoff.Image) bool { return img.ImageID != n.ids[junkA] }))
		}()
		pipeline(t, ctx, n.CRIEndpoint(), shared, "", false)
		if err := <-scanErr; err != nil {
			t.Fatalf("scanner: %v", err)
		}
		present := n.present(t)
		if !present[junkA] || present[junkB] || present[appImage] {
			t.Errorf("after the scan: %v; want junk/a kept (the scanner kept it), junk/b and app removed", present)
		}
	})
}
