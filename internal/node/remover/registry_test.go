package remover

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/registrycheck"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestNeedsCheck: which planned removals are asked about at their
// registry.
func TestNeedsCheck(t *testing.T) {
	now := t0
	type got struct {
		Need bool
		Why  string
	}
	for name, tc := range map[string]struct {
		policy     retention.Policy
		referenced bool
		lastUsed   time.Time
		want       got
	}{
		"listed, referenced":           {policy: retention.Listed, referenced: true, lastUsed: now.Add(-time.Hour)},
		"unused, referenced":           {policy: retention.Unused, referenced: true, want: got{true, "a workload references it"}},
		"vulnerable, used an hour ago": {policy: retention.Vulnerable, lastUsed: now.Add(-time.Hour), want: got{true, "a container used it 1h0m0s ago"}},
		"unused for, used 8 days ago":  {policy: retention.UnusedFor, lastUsed: now.Add(-8 * 24 * time.Hour)},
		"disk pressure, never used":    {policy: retention.DiskPressure},
	} {
		t.Run(name, func(t *testing.T) {
			need, why := needsCheck(tc.policy, tc.referenced, tc.lastUsed, now, 7*24*time.Hour)
			if diff := cmp.Diff(tc.want, got{need, why}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRegistryOutcome: what each answer does to a removal.
func TestRegistryOutcome(t *testing.T) {
	type got struct {
		Outcome workerresult.Outcome
		Remove  bool
	}
	want := map[string]got{
		"present":         {workerresult.Removed, true},
		"gone":            {workerresult.GoneFromRegistry, false},
		"unknown":         {workerresult.RegistryUnreachable, false},
		"present, remove": {workerresult.Removed, true},
		"gone, remove":    {workerresult.GoneFromRegistry, false},
		"unknown, remove": {workerresult.Removed, true},
	}
	gotten := map[string]got{}
	for _, a := range registrycheck.Answers {
		o, r := registryOutcome(a, false)
		gotten[string(a)] = got{o, r}
		o, r = registryOutcome(a, true)
		gotten[string(a)+", remove"] = got{o, r}
	}
	if diff := cmp.Diff(want, gotten); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRegistryCheckRun: a scheduled run's removals of images a container
// used within the lookback go by the registry's answer; an image not used
// lately is not asked about, nor is an ImageList's name.
func TestRegistryCheckRun(t *testing.T) {
	digest := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, digest('1')):
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, digest('2')):
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	image := func(n byte) cri.Image {
		return cri.Image{ID: id(n), Tags: []string{host + "/team/app" + string(n) + ":1"}, Digests: []string{host + "/team/app" + string(n) + "@" + digest(n)}, Size: 10}
	}
	present, gone, failing, unusedImg := image('1'), image('2'), image('3'), image('4')
	images := []cri.Image{present, gone, failing, unusedImg}
	week := 7 * 24 * time.Hour
	type run struct {
		outcomes map[string]workerresult.Outcome
		checks   *workerresult.RegistryChecks
	}
	do := func(t *testing.T, targets Targets, removeUnreachable bool) run {
		dir := stateDir(t)
		rt := timedRuntime{fakeRuntime: &fakeRuntime{images: images, containers: []cri.Container{
			running("a", present.Tags[0]), running("b", gone.Tags[0]), running("c", failing.Tags[0]),
		}}, times: map[string]time.Time{}}
		for _, img := range images {
			rt.times[img.ID] = t0.Add(-30 * 24 * time.Hour)
		}
		reg := &RegistryCheck{Lookback: week, RemoveUnreachable: removeUnreachable, Config: registrycheck.Config{PlainHTTP: []string{host}}}
		opts := func(now time.Time, info *RunInfo) Options {
			return Options{Now: now, StateDir: dir, Registry: reg, Info: info}
		}
		// The first run sees the containers use three images.
		if _, err := Run(context.Background(), rt, Targets{Scheduled: true}, opts(t0, nil)); err != nil {
			t.Fatal(err)
		}
		rt.containers = nil
		var info RunInfo
		results, err := Run(context.Background(), rt, targets, opts(t0.Add(time.Hour), &info))
		if err != nil {
			t.Fatal(err)
		}
		out := run{outcomes: map[string]workerresult.Outcome{}, checks: info.RegistryChecks}
		for _, r := range results {
			out.outcomes[r.ImageID] = r.Outcome
		}
		if out.checks != nil {
			out.checks.First = nil
		}
		return out
	}
	all := Targets{Scheduled: true, Collected: []string{present.ID, gone.ID, failing.ID, unusedImg.ID}}
	listed := Targets{Refs: handed(gone.ID), Entries: []string{gone.ID}}
	for name, tc := range map[string]struct {
		targets           Targets
		removeUnreachable bool
		want              run
	}{
		"keep when unreachable": {targets: all, want: run{
			outcomes: map[string]workerresult.Outcome{present.ID: workerresult.Removed, gone.ID: workerresult.GoneFromRegistry, failing.ID: workerresult.RegistryUnreachable, unusedImg.ID: workerresult.Removed},
			checks:   &workerresult.RegistryChecks{Counts: map[string]int{"present": 1, "gone": 1, "unknown": 1}, Requests: 3},
		}},
		"remove when unreachable": {targets: all, removeUnreachable: true, want: run{
			outcomes: map[string]workerresult.Outcome{present.ID: workerresult.Removed, gone.ID: workerresult.GoneFromRegistry, failing.ID: workerresult.Removed, unusedImg.ID: workerresult.Removed},
			checks:   &workerresult.RegistryChecks{Counts: map[string]int{"present": 1, "gone": 1, "unknown": 1}, Requests: 3},
		}},
		"an ImageList's name is not asked about": {targets: listed, want: run{
			outcomes: map[string]workerresult.Outcome{gone.ID: workerresult.Removed},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, do(t, tc.targets, tc.removeUnreachable), cmp.AllowUnexported(run{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRegistryFlags: the flags' settings, and the refusals.
func TestRegistryFlags(t *testing.T) {
	// The system's own words for a missing file differ between Linux and
	// Windows.
	missing := filepath.Join("no-such-directory", "config.json")
	_, missingErr := os.Open(missing)
	type got struct {
		Mirrors   map[string][]string
		PlainHTTP []string
		Remove    bool
		Err       string
	}
	for name, tc := range map[string]struct {
		args []string
		want got
	}{
		"off": {args: []string{"--registry-mirror=docker.io=m.example"}},
		"on": {args: []string{"--registry-check", "--registry-mirror=docker.io=m.example,https://n.example", "--registry-mirror=quay.io=q.example", "--registry-plain-http=127.0.0.1:5000,localhost:5000", "--registry-when-unreachable=remove"},
			want: got{Mirrors: map[string][]string{"docker.io": {"m.example", "https://n.example"}, "quay.io": {"q.example"}}, PlainHTTP: []string{"127.0.0.1:5000", "localhost:5000"}, Remove: true}},
		"bad when":               {args: []string{"--registry-check", "--registry-when-unreachable=maybe"}, want: got{Err: `--registry-when-unreachable="maybe": want keep or remove`}},
		"unreadable credentials": {args: []string{"--registry-check", "--registry-credentials=" + missing}, want: got{Err: "note: the registries' credentials could not be read, asked anonymously: " + missingErr.Error()}},
	} {
		t.Run(name, func(t *testing.T) {
			var c Command
			fs := flag.NewFlagSet("remover", flag.ContinueOnError)
			c.Bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			rc, err := c.Registry.Settings()
			var g got
			if err != nil {
				g.Err = err.Error()
			}
			if rc != nil {
				g.Mirrors, g.PlainHTTP, g.Remove = rc.Config.Mirrors, rc.Config.PlainHTTP, rc.RemoveUnreachable
				if rc.Note != "" {
					g.Err = "note: " + rc.Note
				}
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRegistryCheckSpare: under disk pressure, the candidates a drain may
// take are asked about too; one the answer keeps is not drained, and its
// plan's result stands (no second result for it).
func TestRegistryCheckSpare(t *testing.T) {
	digest := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, digest('2')) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	image := func(n byte) cri.Image {
		return cri.Image{ID: id(n), Tags: []string{host + "/app" + string(n) + ":1"}, Digests: []string{host + "/app" + string(n) + "@" + digest(n)}, Size: 10}
	}
	images := []cri.Image{image('1'), image('2'), image('3'), image('4')}
	s := NewSnapshot(images, nil, protect.Policy{})
	used := t0.Add(-time.Hour)
	r := Retention{Now: t0, Ages: []Age{{LastUsed: used}, {LastUsed: used}, {LastUsed: used}, {}}}
	remove := []Removal{{Image: 0, Target: images[0].ID, Policy: retention.DiskPressure}}
	spare := []retention.Candidate{{Index: 1}, {Index: 2}, {Index: 3}}
	info := &RunInfo{}
	opts := Options{Registry: &RegistryCheck{Lookback: 24 * time.Hour, Config: registrycheck.Config{PlainHTTP: []string{host}}}, Log: slog.New(slog.DiscardHandler)}
	gotRemove, kept, left := checkRegistry(context.Background(), s, r, remove, spare, opts, info)
	type got struct {
		Remove []int
		Kept   int
		Left   []int
		Counts map[string]int
	}
	g := got{Kept: len(kept), Counts: info.RegistryChecks.Counts}
	for _, rm := range gotRemove {
		g.Remove = append(g.Remove, rm.Image)
	}
	for _, c := range left {
		g.Left = append(g.Left, c.Index)
	}
	want := got{Remove: []int{0}, Left: []int{2, 3}, Counts: map[string]int{"present": 2, "gone": 1}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
