//go:build linux && bench

// Package bench measures the node workers against a real containerd:
//
//	make bench-remover   (go test -tags bench -run TestRemoverBench ./test/bench)
//
// It prints the figures and writes them to bench/results/remover.json. It
// asserts nothing about time, the goals are read off the figures, but for
// one: judging 10,000 images against 20,000 exclusion patterns takes under
// 1 s of CPU.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/exclusionlist"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

type figure struct {
	Images  int     `json:"images"`
	Method  string  `json:"method"`
	Seconds float64 `json:"seconds"`
	// RatioToFastestRaw is Seconds over the fastest raw loop at this size.
	RatioToFastestRaw float64 `json:"ratioToFastestRaw,omitempty"`
	PeakRSSMiB        float64 `json:"peakRssMiB,omitempty"`
	// MaxRecheckWindowMs is the remover's longest time from the start of
	// the container listing that cleared an image to its removal's issue.
	MaxRecheckWindowMs float64 `json:"maxRecheckWindowMs,omitempty"`
	// PlanMs is the remover's own measure of its retention planning (ages,
	// the node's state file, the plan); PlanShare is that over Seconds.
	PlanMs    float64 `json:"planMs,omitempty"`
	PlanShare float64 `json:"planShare,omitempty"`
	// CPUSeconds is this process's CPU time (exclusion rows); Excluded is
	// how many images the exclusions protected.
	CPUSeconds float64 `json:"cpuSeconds,omitempty"`
	Excluded   int     `json:"excluded,omitempty"`
}

// selected reports whether a row is measured: BENCH_ONLY, a comma-separated
// list of substrings of the methods, limits a run to some (seeding tens of
// thousands of images for each row takes long).
func selected(method string) bool {
	only := os.Getenv("BENCH_ONLY")
	if only == "" {
		return true
	}
	for _, s := range strings.Split(only, ",") {
		if strings.Contains(method, s) {
			return true
		}
	}
	return false
}

// defaultRemoverLimit is the remover's default memory limit
// (components.remover.limit.mem).
const defaultRemoverLimit = 30 << 20

func sizes() []int { return envSizes("BENCH_SIZES", 200, 2000) }

// envSizes reads a comma-separated list of sizes from env, or returns def.
func envSizes(env string, def ...int) []int {
	if s := os.Getenv(env); s != "" {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
		return out
	}
	return def
}

// workers are the remover and the collector, as released.
var workers = gobuild.New("cmd/remover", "cmd/collector")

// seed imports n small unused images, in batches, and returns their IDs.
func seed(t *testing.T, c *testcontainerd.Containerd, n int, round int) []string {
	const batch = 250
	for start := 0; start < n; start += batch {
		var imgs []testimage.Image
		for i := start; i < min(n, start+batch); i++ {
			imgs = append(imgs, testimage.Image{Tags: []string{fmt.Sprintf("bench.example.com/r%d/img%05d:1", round, i)}, RandomBytes: 256})
		}
		c.Import(t, imgs...)
	}
	var ids []string
	for tag, id := range c.ImageIDs(t) {
		if strings.HasPrefix(tag, fmt.Sprintf("bench.example.com/r%d/", round)) {
			ids = append(ids, id)
		}
	}
	if len(ids) != n {
		t.Fatalf("seeded %d images, want %d", len(ids), n)
	}
	return ids
}

func rawLoop(t *testing.T, client *cri.Client, ids []string, workers int) time.Duration {
	start := time.Now()
	ch := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for id := range ch {
				if err := client.RemoveImage(context.Background(), id); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, id := range ids {
		ch <- id
	}
	close(ch)
	wg.Wait()
	return time.Since(start)
}

// peakMiB reads the peak RSS the worker measured itself (VmHWM) from its
// summary; a child's rusage would count the memory of the test process it
// was forked from.
func peakMiB(t *testing.T, summaryFile string) float64 {
	return float64(summaryOf(t, summaryFile).PeakRSSBytes) / (1 << 20)
}

func summaryOf(t *testing.T, summaryFile string) workerresult.Summary {
	data, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := workerresult.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRemoverBench(t *testing.T) {
	bin := workers.Dir(t)
	var figures []figure
	for _, n := range sizes() {
		c := testcontainerd.Start(t)
		client := c.Client(t)
		round := 0
		next := func() []string { round++; return seed(t, c, n, round) }

		raws := map[string]int{"raw sequential": 1, "raw 16 parallel": 16, "raw 64 parallel": 64, "raw all at once": n}
		fastest := time.Duration(1<<63 - 1)
		var rows []figure
		order := []string{"raw sequential", "raw 16 parallel", "raw 64 parallel", "raw all at once"}
		if os.Getenv("BENCH_QUICK") != "" {
			// Tuning runs: only the fastest raw loop, as the reference.
			order = order[3:]
		}
		for _, name := range order {
			if !selected(name) {
				continue
			}
			ids := next()
			d := rawLoop(t, client, ids, raws[name])
			fastest = min(fastest, d)
			rows = append(rows, figure{Images: n, Method: name, Seconds: d.Seconds()})
			t.Logf("%5d images  %-22s %8.2fs", n, name, d.Seconds())
		}

		// The remover binary, "*" with its safety re-checks, start to exit:
		// with its automatic concurrency (all at once here, where no memory
		// limit applies), and as it runs under upstream's 30Mi limit.
		// BENCH_BASELINE_REMOVER: another remover binary (an earlier
		// build) measured the same way, for before/after figures.
		// "in a 30Mi cgroup" runs it under the default limit for real: the
		// kernel kills it if it goes over, and it sizes its batches and
		// tells the Go runtime the limit as in a pod.
		type variant struct {
			name, concurrency, binary string
			cgroup                    bool
		}
		variants := []variant{
			{name: "remover (binary, *)"},
			{name: "remover, 30Mi budget", concurrency: strconv.Itoa(896)},
			{name: "remover in a 30Mi cgroup", cgroup: true},
		}
		if b := os.Getenv("BENCH_BASELINE_REMOVER"); b != "" {
			variants = append(variants, variant{name: "baseline remover (*)", binary: b})
		}
		for _, v := range variants {
			if !selected(v.name) {
				continue
			}
			next()
			list := filepath.Join(t.TempDir(), "images")
			_ = os.WriteFile(list, []byte(`["*"]`), 0o644)
			summary := filepath.Join(t.TempDir(), "remover-summary")
			// No minimum age (the images are seconds old); the node state
			// file is written, as on a node.
			args := []string{"--imagelist=" + list, "--runtime-endpoint=" + c.Endpoint, "--summary-file=" + summary, "--log-level=warn",
				"--min-age=0s", "--state-dir=" + t.TempDir()}
			if v.concurrency != "" {
				args = append(args, "--concurrency="+v.concurrency)
			}
			binary := filepath.Join(bin, "remover")
			if v.binary != "" {
				binary = v.binary
			}
			cmd := exec.Command(binary, args...)
			var cg *memoryCgroup
			if v.cgroup {
				if cg = newMemoryCgroup(t, defaultRemoverLimit); cg == nil {
					continue
				}
				cmd = cg.command(binary, args...)
			}
			if e := os.Getenv("BENCH_REMOVER_ENV"); e != "" {
				cmd.Env = append(os.Environ(), strings.Fields(e)...)
			}
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("remover: %v\n%s", err, out)
			}
			d := time.Since(start)
			sum := summaryOf(t, summary)
			if cg != nil {
				t.Logf("%d images in a %d MiB cgroup: cgroup peak %.1f MiB (page cache included), process peak RSS %.1f MiB",
					n, defaultRemoverLimit>>20, float64(cg.peak())/(1<<20), float64(sum.PeakRSSBytes)/(1<<20))
			}
			rows = append(rows, figure{Images: n, Method: v.name, Seconds: d.Seconds(), PeakRSSMiB: float64(sum.PeakRSSBytes) / (1 << 20),
				MaxRecheckWindowMs: sum.MaxRecheckWindowMs, PlanMs: sum.PlanMs, PlanShare: sum.PlanMs / 1000 / d.Seconds()})
			if left := len(c.ImageIDs(t)); left > 2 {
				t.Errorf("remover left %d image references", left)
			}
		}

		// The collector with n images present: peak memory.
		if selected("collector (binary)") {
			rows = append(rows, collectorFigure(t, c, bin, n, next))
		}
		for i := range rows {
			if rows[i].Seconds > 0 && fastest < time.Duration(1<<63-1) {
				rows[i].RatioToFastestRaw = rows[i].Seconds / fastest.Seconds()
			}
		}
		figures = append(figures, rows...)
	}
	figures = append(figures, planningFigure(t, figures))
	figures = append(figures, exclusionFigures(t)...)
	printFigures(figures)
	writeResults(t, "remover", "figures", figures)
}

// collectorFigure measures the collector's peak memory with n images.
func collectorFigure(t *testing.T, c *testcontainerd.Containerd, bin string, n int, next func() []string) figure {
	next()
	shared, _ := os.MkdirTemp("", "bench")
	colSummary := filepath.Join(t.TempDir(), "collector-summary")
	col := exec.Command(filepath.Join(bin, "collector"), "--scan-disabled", "--runtime-endpoint="+c.Endpoint,
		"--shared-dir="+shared, "--summary-file="+colSummary, "--log-level=warn", "--state-dir="+t.TempDir())
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	got, err := handoff.FIFO{}.ReceiveImages(ctx, handoff.Path(shared, handoff.ScanErase))
	if err == nil {
		err = handoff.FIFO{}.SignalCompletion(ctx, handoff.Path(shared, handoff.EraseCompleteCollect))
	}
	cancel()
	if err != nil || len(got) != n {
		t.Fatalf("collector hand-off: %d images, %v", len(got), err)
	}
	if err := col.Wait(); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(shared)
	return figure{Images: n, Method: "collector (binary)", PeakRSSMiB: peakMiB(t, colSummary)}
}

func printFigures(figures []figure) {
	fmt.Printf("\n%-7s %-34s %10s %8s %10s %12s %16s %10s\n", "IMAGES", "METHOD", "SECONDS", "CPU s", "x FASTEST", "PEAK RSS MiB", "RECHECK MAX ms", "PLAN %")
	for _, f := range figures {
		secs, cpu, ratio, rss, window, plan := "-", "-", "-", "-", "-", "-"
		if f.CPUSeconds > 0 {
			cpu = fmt.Sprintf("%.3f", f.CPUSeconds)
		}
		if f.MaxRecheckWindowMs > 0 {
			window = fmt.Sprintf("%.1f", f.MaxRecheckWindowMs)
		}
		if f.PlanShare > 0 {
			plan = fmt.Sprintf("%.2f", 100*f.PlanShare)
		}
		if f.Seconds > 0 {
			secs = fmt.Sprintf("%.2f", f.Seconds)
		}
		if f.RatioToFastestRaw > 0 {
			ratio = fmt.Sprintf("%.2f", f.RatioToFastestRaw)
		}
		if f.PeakRSSMiB > 0 {
			rss = fmt.Sprintf("%.1f", f.PeakRSSMiB)
		}
		fmt.Printf("%-7d %-34s %10s %8s %10s %12s %16s %10s\n", f.Images, f.Method, secs, cpu, ratio, rss, window, plan)
	}
}

// exclusionFigures judges 200 and 10,000 images (BENCH_EXCLUSION_SIZES)
// against 20,000 patterns of every form, read from one list as a
// worker reads it, the way a worker run does: remover.ReadNode on a
// synthetic node (the snapshot and every image's verdict), in CPU seconds of
// this process. A few patterns match; most images are checked against all.
func exclusionFigures(t *testing.T) []figure {
	if !selected("exclusions") {
		return nil
	}
	list := make([]string, 20000)
	for j := range list {
		k := j / 8
		list[j] = [...]string{fmt.Sprintf("registry.example.com/team%02d/app%05d:v9", k%50, k), fmt.Sprintf("lib%05d:old", k),
			fmt.Sprintf("sha256:%064x", k+1<<50), fmt.Sprintf("quay.io/org%02d/svc%05d@sha256:%064x", k%20, k, k+1<<50),
			fmt.Sprintf("quay.io/org%02d/svc%05d:*", k%20, k+1<<20), fmt.Sprintf("localhost:5000/ci/job%05d/*", k+1<<20),
			fmt.Sprintf("registry.example.com/other%04d/*", k), fmt.Sprintf("bitnami/old%04d/*", k)}[j%8]
	}
	// Hits, spread over the list, one form after another (image i of form
	// i%4 below): a tag, repository:*, a repo digest, a path, an image ID.
	for j := 1000; j < len(list); j += 1000 {
		form := j / 1000 % 5
		i := j/1000*8 + form
		list[j] = [...]string{fmt.Sprintf("registry.example.com/team%02d/app%05d:v%d", i%50, i, i%7), fmt.Sprintf("lib%05d:*", i),
			fmt.Sprintf("localhost:5000/ci/job%05d@sha256:%064x", i, i+1<<40), fmt.Sprintf("quay.io/org%02d/*", i%20),
			fmt.Sprintf("sha256:%064x", i+1)}[form]
	}
	doc, _ := json.Marshal(map[string][]string{"excluded": list})
	cpu0 := cpuSeconds()
	pats, _, err := exclusionlist.Parse("bench.json", doc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("parsing %d exclusion patterns: %.3f s CPU", len(pats), cpuSeconds()-cpu0)
	var out []figure
	for _, n := range envSizes("BENCH_EXCLUSION_SIZES", 200, 10000) {
		node := &syntheticNode{}
		for i := range n {
			repo := [...]string{fmt.Sprintf("registry.example.com/team%02d/app%05d", i%50, i), fmt.Sprintf("docker.io/library/lib%05d", i),
				fmt.Sprintf("localhost:5000/ci/job%05d", i), fmt.Sprintf("quay.io/org%02d/svc%05d", i%20, i)}[i%4]
			node.images = append(node.images, cri.Image{ID: fmt.Sprintf("sha256:%064x", i+1), Tags: []string{fmt.Sprintf("%s:v%d", repo, i%7)},
				Digests: []string{fmt.Sprintf("%s@sha256:%064x", repo, i+1<<40)}})
		}
		runtime.GC()
		cpu0, start := cpuSeconds(), time.Now()
		snap, err := remover.ReadNode(context.Background(), node, protect.Policy{Exclusions: pats})
		cpu, wall := cpuSeconds()-cpu0, time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		f := figure{Images: n, Method: fmt.Sprintf("exclusions: %d patterns", len(pats)), Seconds: wall.Seconds(), CPUSeconds: cpu}
		for i := range snap.Images {
			if snap.Verdict(i).Reason == workerresult.Excluded {
				f.Excluded++
			}
		}
		t.Logf("%d images x %d exclusion patterns: %.3f s CPU, %.3f s, %d excluded", n, len(pats), cpu, wall.Seconds(), f.Excluded)
		if n >= 10000 && cpu > float64(n)/10000 {
			t.Errorf("%d images x %d patterns took %.2f s of CPU; the goal is under 1 s per 10,000 images", n, len(pats), cpu)
		}
		out = append(out, f)
	}
	return out
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
