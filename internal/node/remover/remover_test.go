package remover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func id(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

var (
	alpine  = cri.Image{ID: id('a'), Tags: []string{"docker.io/library/alpine:3.19", "docker.io/library/alpine:latest"}, Size: 100}
	nginx   = cri.Image{ID: id('b'), Tags: []string{"docker.io/library/nginx:1.27"}, Digests: []string{"docker.io/library/nginx@" + id('d')}, Size: 200}
	redis   = cri.Image{ID: id('c'), Tags: []string{"quay.io/org/redis:7"}, Size: 300}
	pause   = cri.Image{ID: id('e'), Tags: []string{"registry.k8s.io/pause:3.10"}, Size: 1}
	pinned  = cri.Image{ID: id('f'), Tags: []string{"registry.example.com/agent:1"}, Size: 5, Pinned: true}
	untaged = cri.Image{ID: id('9'), Size: 7}
	node    = []cri.Image{alpine, nginx, redis, pause, pinned, untaged}
)

func running(name, image string) cri.Container {
	return cri.Container{ID: "c-" + name, Name: name, State: "CONTAINER_RUNNING", Image: image, ImageRef: image}
}

type outcome struct {
	Target  string
	Image   string
	Outcome workerresult.Outcome
}

func outcomes(results []Result) []outcome {
	out := make([]outcome, len(results))
	for i, r := range results {
		out[i] = outcome{r.Target, r.ImageID, r.Outcome}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Target != out[b].Target {
			return out[a].Target < out[b].Target
		}
		return out[a].Image < out[b].Image
	})
	return out
}

func TestRun(t *testing.T) {
	cases := map[string]struct {
		entries    []string
		containers []cri.Container
		exclusions []string
		want       []outcome
		wantGone   []string
	}{
		"nothing":      {entries: nil},
		"not on node":  {entries: []string{"busybox:1"}, want: []outcome{{"busybox:1", "", workerresult.NotOnNode}}},
		"by short tag": {entries: []string{"alpine:3.19"}, want: []outcome{{"alpine:3.19", id('a'), workerresult.Removed}}, wantGone: []string{id('a')}},
		"by id":        {entries: []string{id('c')}, want: []outcome{{id('c'), id('c'), workerresult.Removed}}, wantGone: []string{id('c')}},
		"by repo digest": {entries: []string{"nginx@" + id('d')},
			want: []outcome{{"nginx@" + id('d'), id('b'), workerresult.Removed}}, wantGone: []string{id('b')}},
		"two tags one image": {entries: []string{"alpine:3.19", "docker.io/library/alpine:latest"},
			want: []outcome{{"alpine:3.19", id('a'), workerresult.Removed}}, wantGone: []string{id('a')}},
		"subset": {entries: []string{"alpine:3.19", "quay.io/org/redis:7", "ghost:1"},
			want:     []outcome{{"alpine:3.19", id('a'), workerresult.Removed}, {"ghost:1", "", workerresult.NotOnNode}, {"quay.io/org/redis:7", id('c'), workerresult.Removed}},
			wantGone: []string{id('a'), id('c')}},
		"running by tag": {entries: []string{"nginx:1.27"}, containers: []cri.Container{running("web", "docker.io/library/nginx:1.27")},
			want: []outcome{{"nginx:1.27", id('b'), workerresult.InUse}}},
		"running by id only": {entries: []string{"nginx:1.27"}, containers: []cri.Container{{Name: "web", Image: id('b'), ImageRef: id('b')}},
			want: []outcome{{"nginx:1.27", id('b'), workerresult.InUse}}},
		"exited container protects": {entries: []string{"alpine"}, containers: []cri.Container{{Name: "job", State: "CONTAINER_EXITED", ImageRef: id('a')}},
			want: []outcome{{"alpine", id('a'), workerresult.InUse}}},
		"pinned":  {entries: []string{"registry.example.com/agent:1"}, want: []outcome{{"registry.example.com/agent:1", id('f'), workerresult.Pinned}}},
		"sandbox": {entries: []string{"registry.k8s.io/pause:3.10"}, want: []outcome{{"registry.k8s.io/pause:3.10", id('e'), workerresult.Pinned}}},
		"excluded exact": {entries: []string{"alpine:3.19"}, exclusions: []string{"docker.io/library/alpine:3.19"},
			want: []outcome{{"alpine:3.19", id('a'), workerresult.Excluded}}},
		"excluded wildcard": {entries: []string{"quay.io/org/redis:7"}, exclusions: []string{"quay.io/*"},
			want: []outcome{{"quay.io/org/redis:7", id('c'), workerresult.Excluded}}},
		"prune all": {entries: []string{"*"}, containers: []cri.Container{running("web", "docker.io/library/nginx:1.27")}, exclusions: []string{"alpine:*"},
			want: []outcome{
				{id('9'), id('9'), workerresult.Removed}, {id('a'), id('a'), workerresult.Excluded}, {id('b'), id('b'), workerresult.InUse},
				{id('c'), id('c'), workerresult.Removed}, {id('e'), id('e'), workerresult.Pinned}, {id('f'), id('f'), workerresult.Pinned},
			},
			wantGone: []string{id('9'), id('c')}},
		"prune plus explicit": {entries: []string{"alpine:3.19", "*"}, containers: []cri.Container{running("web", "docker.io/library/nginx:1.27")},
			want: []outcome{
				{"alpine:3.19", id('a'), workerresult.Removed}, {id('9'), id('9'), workerresult.Removed}, {id('b'), id('b'), workerresult.InUse},
				{id('c'), id('c'), workerresult.Removed}, {id('e'), id('e'), workerresult.Pinned}, {id('f'), id('f'), workerresult.Pinned},
			},
			wantGone: []string{id('9'), id('a'), id('c')}},
		"exclude everything": {entries: []string{"*"}, exclusions: []string{"*"},
			want: []outcome{
				{id('9'), id('9'), workerresult.Excluded}, {id('a'), id('a'), workerresult.Excluded}, {id('b'), id('b'), workerresult.Excluded},
				{id('c'), id('c'), workerresult.Excluded}, {id('e'), id('e'), workerresult.Pinned}, {id('f'), id('f'), workerresult.Pinned},
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &fakeRuntime{images: node, containers: tc.containers, sandbox: "registry.k8s.io/pause:3.10"}
			var pats []imageref.Pattern
			for _, e := range tc.exclusions {
				p := imageref.ParsePattern(e)
				pats = append(pats, p)
			}
			targets, invalid := ParseTargets(tc.entries)
			if len(invalid) > 0 {
				t.Fatalf("invalid: %v", invalid)
			}
			results, err := Run(context.Background(), rt, targets, Options{Policy: protect.Policy{Exclusions: pats}, Concurrency: 3})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, outcomes(results), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			sort.Strings(rt.removed)
			if diff := cmp.Diff(tc.wantGone, rt.removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecheck: a container that starts after the node was read, but before
// the image's removal, keeps the image.
func TestRecheck(t *testing.T) {
	rt := &fakeRuntime{images: node, sandbox: "registry.k8s.io/pause:3.10"}
	rt.onList = func(n int, f *fakeRuntime) {
		if n == 1 {
			f.mu.Lock()
			f.containers = append(f.containers, cri.Container{Name: "late", ImageRef: id('c')})
			f.mu.Unlock()
		}
	}
	targets, _ := ParseTargets([]string{"*"})
	results, err := Run(context.Background(), rt, targets, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.ImageID == id('c') && r.Outcome != workerresult.InUse {
			t.Errorf("redis: %s, want in use", r.Outcome)
		}
	}
	if len(rt.removed) != 3 {
		t.Errorf("removed %v, want alpine, nginx and the untagged image", rt.removed)
	}
	if rt.lists != 3 {
		t.Errorf("%d container listings, want one to read the node, one re-check for the batch and one to judge the removals", rt.lists)
	}
}

// TestRecheckFailureKeepsImages: without a fresh container list nothing is removed.
func TestRecheckFailureKeepsImages(t *testing.T) {
	rt := &fakeRuntime{images: node, listErr: errors.New("runtime busy")}
	targets, _ := ParseTargets([]string{"*"})
	results, err := Run(context.Background(), rt, targets, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.removed) != 0 {
		t.Errorf("removed %v without a re-check", rt.removed)
	}
	for _, r := range results {
		if r.Outcome == workerresult.Removed {
			t.Errorf("%s reported removed", r.Target)
		}
	}
}

func TestDryRunAndFailures(t *testing.T) {
	rt := &fakeRuntime{images: node, removeErr: map[string]error{id('c'): errors.New("disk on fire")}}
	targets, invalid := ParseTargets([]string{"alpine:3.19", "quay.io/org/redis:7", "Not A Ref"})
	results, err := Run(context.Background(), rt, targets, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(append(invalid, results...), false)
	if diff := cmp.Diff(map[string]int{"removed": 1, "failed": 1, "invalid": 1}, s.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if s.BytesFreed != 100 || len(s.Failures) != 2 {
		t.Errorf("summary %+v", s)
	}

	dry := &fakeRuntime{images: node}
	results, err = Run(context.Background(), dry, targets, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.removed) != 0 {
		t.Errorf("dry run removed %v", dry.removed)
	}
	if s := Summarize(results, true); s.Counts["removed"] != 2 || s.BytesFreed != 400 || !s.DryRun {
		t.Errorf("dry-run summary %+v", s)
	}
}

// TestNodeOutcome: removals that error (other than "already gone", which the
// client reports as success) fail the node: exit code 2 and a summary error
// with the count and the first error. Images kept for a reason do not.
func TestNodeOutcome(t *testing.T) {
	boom := errors.New("rpc error: code = Unavailable desc = connection refused")
	cases := map[string]struct {
		removeErr map[string]error
		listErr   error
		entries   []string
		wantCode  int
		wantErr   string
	}{
		"all removed": {entries: []string{"alpine:3.19", "quay.io/org/redis:7"}, wantCode: workerresult.ExitOK},
		"kept for a reason": {entries: []string{"registry.k8s.io/pause:3.10", "registry.example.com/agent:1", "ghost:1"},
			wantCode: workerresult.ExitOK},
		"all removals failed": {entries: []string{"alpine:3.19", "quay.io/org/redis:7"},
			removeErr: map[string]error{id('a'): boom, id('c'): boom},
			wantCode:  workerresult.ExitNodeFailed, wantErr: "2 of 2 removals failed; first: alpine:3.19: rpc error"},
		"one of two failed": {entries: []string{"alpine:3.19", "quay.io/org/redis:7"},
			removeErr: map[string]error{id('c'): boom},
			wantCode:  workerresult.ExitNodeFailed, wantErr: "1 of 2 removals failed; first: quay.io/org/redis:7: rpc error"},
		"re-check failed": {entries: []string{"alpine:3.19"}, listErr: boom,
			wantCode: workerresult.ExitNodeFailed, wantErr: "1 of 1 removals failed; first: alpine:3.19: re-check of containers failed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &fakeRuntime{images: node, sandbox: "registry.k8s.io/pause:3.10", removeErr: tc.removeErr, listErr: tc.listErr}
			targets, _ := ParseTargets(tc.entries)
			results, err := Run(context.Background(), rt, targets, Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := Summarize(results, false)
			err = NodeOutcome(s)
			if code := worker.ExitCode(err); code != tc.wantCode {
				t.Errorf("exit code %d, want %d (err %v)", code, tc.wantCode, err)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestSandboxImageSources: the pause image is protected from the runtime's
// status, else from its pod sandboxes, else by its name, and the run says
// when it had to guess.
func TestSandboxImageSources(t *testing.T) {
	pause39 := cri.Image{ID: id('7'), Tags: []string{"registry.k8s.io/pause:3.9"}, Size: 1}
	images := append(append([]cri.Image{}, node...), pause39)
	cases := map[string]struct {
		status    string
		podImages []string
		podErr    error
		pinPause  bool
		wantKept  map[string]string // image ID -> detail
		wantGuess bool
	}{
		"status": {status: "registry.k8s.io/pause:3.10",
			wantKept: map[string]string{id('e'): "the runtime's sandbox image"}},
		"status and an older pod sandbox": {status: "registry.k8s.io/pause:3.10", podImages: []string{"registry.k8s.io/pause:3.9"},
			wantKept: map[string]string{id('e'): "the runtime's sandbox image", id('7'): "a pod sandbox's image"}},
		"pod sandboxes only": {podImages: []string{"registry.k8s.io/pause:3.10"},
			wantKept: map[string]string{id('e'): "a pod sandbox's image"}},
		"neither": {wantGuess: true,
			wantKept: map[string]string{id('e'): "looks like a pause image (the runtime named no sandbox image)", id('7'): "looks like a pause image (the runtime named no sandbox image)"}},
		// containerd 2.x: its sandbox image is pinned, and its status
		// names none.
		"a pinned pause image, no name": {pinPause: true,
			wantKept: map[string]string{id('e'): "pinned by the runtime"}},
		"sandboxes unreadable": {status: "registry.k8s.io/pause:3.10", podErr: errors.New("unavailable"), wantGuess: true,
			wantKept: map[string]string{id('e'): "the runtime's sandbox image", id('7'): "looks like a pause image (the runtime named no sandbox image)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			imgs := images
			if tc.pinPause {
				imgs = slices.Clone(images)
				for i := range imgs {
					if imgs[i].ID == id('e') {
						imgs[i].Pinned = true
					}
				}
			}
			rt := &fakeRuntime{images: imgs, sandbox: tc.status, podImages: tc.podImages, podErr: tc.podErr}
			targets, _ := ParseTargets([]string{"*"})
			var info RunInfo
			results, err := Run(context.Background(), rt, targets, Options{Info: &info})
			if err != nil {
				t.Fatal(err)
			}
			kept := map[string]string{}
			for _, r := range results {
				if r.Outcome == workerresult.Pinned && r.ImageID != id('f') {
					kept[r.ImageID] = r.Detail
				}
			}
			if diff := cmp.Diff(tc.wantKept, kept); diff != "" {
				t.Errorf("sandbox images kept (-want +got):\n%s", diff)
			}
			if info.SandboxGuessed != tc.wantGuess {
				t.Errorf("SandboxGuessed = %v, want %v", info.SandboxGuessed, tc.wantGuess)
			}
			s := Summarize(results, false)
			info.Apply(&s)
			if s.SandboxImageGuessed != tc.wantGuess {
				t.Errorf("summary SandboxImageGuessed = %v", s.SandboxImageGuessed)
			}
		})
	}
}

func manyImages(n int) []cri.Image {
	out := make([]cri.Image, n)
	for i := range out {
		out[i] = cri.Image{ID: fmt.Sprintf("sha256:%064x", i+1), Tags: []string{fmt.Sprintf("example.com/img%d:1", i)}, Size: 1}
	}
	return out
}

// TestRecheckWindowIsBounded: however large the batch in flight, every
// removal is issued at most RecheckGroup removals after a fresh container
// listing, and the run reports the longest listing-to-issue time.
func TestRecheckWindowIsBounded(t *testing.T) {
	rt := &fakeRuntime{images: manyImages(1000), sandbox: "registry.k8s.io/pause:3.10"}
	targets, _ := ParseTargets([]string{"*"})
	var info RunInfo
	results, err := Run(context.Background(), rt, targets, Options{Concurrency: 4096, Info: &info})
	if err != nil {
		t.Fatal(err)
	}
	if s := Summarize(results, false); s.Counts["removed"] != 1000 {
		t.Fatalf("counts %v", s.Counts)
	}
	worst := 0
	for _, n := range rt.sinceList {
		worst = max(worst, n)
	}
	if worst > RecheckGroup {
		t.Errorf("a removal was issued %d removals after the last container listing, want at most %d", worst, RecheckGroup)
	}
	if want := 1000 / RecheckGroup; info.Rechecks < want {
		t.Errorf("%d re-checks for 1000 removals, want at least %d", info.Rechecks, want)
	}
	// Zero is possible where the clock is coarse (Windows, Wine): the fake
	// runtime answers within a tick.
	if info.MaxRecheckWindow < 0 || info.MaxRecheckWindow > MaxRecheckAge {
		t.Errorf("MaxRecheckWindow = %v, want within [0, %v]", info.MaxRecheckWindow, MaxRecheckAge)
	}
}

// TestSlowRecheckKeepsImages: a container listing that takes longer than
// MaxRecheckAge is too old to clear a removal: the images are kept, and the
// node fails.
func TestSlowRecheckKeepsImages(t *testing.T) {
	rt := &fakeRuntime{images: node, sandbox: "registry.k8s.io/pause:3.10"}
	rt.onList = func(n int, f *fakeRuntime) {
		if n == 1 {
			f.mu.Lock()
			f.listDelay = MaxRecheckAge + 50*time.Millisecond
			f.mu.Unlock()
		}
	}
	targets, _ := ParseTargets([]string{"alpine:3.19"})
	results, err := Run(context.Background(), rt, targets, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.removed) != 0 {
		t.Errorf("removed %v on a stale re-check", rt.removed)
	}
	if len(results) != 1 || results[0].Outcome != workerresult.Failed || !strings.Contains(results[0].Detail, "image kept") {
		t.Errorf("results %+v", results)
	}
}
