//go:build bench && linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dbtypes "github.com/aquasecurity/trivy-db/pkg/types"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/manager/scandb"
	"github.com/eraser-oss/eraser/internal/manager/scanservice"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

// fleetResult is one fleet of N nodes' run.
type fleetResult struct {
	Mode      string `json:"mode"`
	Nodes     int    `json:"nodes"`
	DBFetches int    `json:"dbFetches"`
	// DBServed counts the DB copies the scan service sent to scanners:
	// only a node with an image no other node judged needs one.
	DBServed    int     `json:"dbServed"`
	ScansMade   int     `json:"scansMade"`
	Shared      int     `json:"verdictsShared"`
	WallSeconds float64 `json:"wallSeconds"`
	// ScanPhaseSeconds is the longest scan phase of a node (its scanner's
	// "scan finished" line: judging its images, waits for verdicts
	// included), without the processes' start. WallSeconds runs from the
	// collectors' start to the last node's end.
	ScanPhaseSeconds float64 `json:"scanPhaseSeconds"`
	// ServiceCPUSeconds and ServiceHeapMiB are the scan service's, which
	// runs in the benchmark's process (the bench process does nothing
	// else meanwhile): its CPU time, and its peak heap in use above the
	// process's before the fleet started.
	ServiceCPUSeconds float64 `json:"serviceCpuSeconds,omitempty"`
	ServiceHeapMiB    float64 `json:"serviceHeapMiB,omitempty"`
	// AbuseRequests are the requests the lying scanner sent (abusive
	// mode: N-1 honest nodes and one that floods and forges); Refused the
	// verdicts the service refused, Overruled those of the liar's that
	// two honest nodes' scans overturned.
	AbuseRequests int `json:"abuseRequests,omitempty"`
	Refused       int `json:"refused,omitempty"`
	Overruled     int `json:"overruled,omitempty"`

	// keys are the keys the nodes asked about; counts each node's
	// verdict counts.
	keys   []scanshare.Key
	counts []map[string]int
}

// fleetNodes are the fleet sizes, BENCH_FLEET="1 10" for fewer.
func fleetNodes() []int {
	out := []int{1, 10, 100}
	if v := os.Getenv("BENCH_FLEET"); v != "" {
		out = nil
		for _, f := range strings.Fields(v) {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestScannerFleetBench: N nodes, each the real collector, scanner and
// remover (dry run) against one real containerd holding the same 20
// images, with the cluster's DB copy and verdicts (the scan service) or
// each scanning alone (each fetching its DB from the repository). The
// repository is a loopback registry that counts the DB's downloads.
func TestScannerFleetBench(t *testing.T) {
	testcontainerd.Require(t)
	bin := buildWorkers(t)
	c := testcontainerd.Start(t)
	var imgs []testimage.Image
	for i := range images {
		imgs = append(imgs, benchImage(fmt.Sprintf("bench.local/app-%02d:1", i), i))
	}
	c.Import(t, imgs...)

	var results []fleetResult
	for _, n := range fleetNodes() {
		var clean fleetResult
		for _, mode := range []string{"shared", "abusive", "alone"} {
			if mode == "abusive" && n < 3 {
				continue // a liar needs two honest nodes to be overruled
			}
			r := runFleet(t, bin, c, n, mode != "alone", mode == "abusive", clean.keys)
			r.Mode = mode
			if mode == "shared" {
				clean = r
			}
			if mode == "abusive" {
				for i, counts := range r.counts {
					if diff := cmp.Diff(clean.counts[0], counts); diff != "" {
						t.Errorf("with a lying scanner, node %d judged otherwise than without (-clean +abused):\n%s", i, diff)
					}
				}
			}
			results = append(results, r)
			fmt.Printf("%-7s nodes %4d: DB fetches %4d, DB copies served %4d, scans %5d, shared %5d, wall %7.1f s, scan phase %6.2f s, service CPU %5.2f s, service heap +%5.1f MiB\n",
				r.Mode, r.Nodes, r.DBFetches, r.DBServed, r.ScansMade, r.Shared, r.WallSeconds, r.ScanPhaseSeconds, r.ServiceCPUSeconds, r.ServiceHeapMiB)
		}
	}
	fmt.Printf("\n%-7s %6s %10s %10s %8s %8s %9s %12s %12s %12s %10s %10s\n", "mode", "nodes", "DB fetch", "DB served", "scans", "shared", "wall s", "scan phase", "service CPU", "service +MiB", "abuse req", "refused")
	for _, r := range results {
		fmt.Printf("%-7s %6d %10d %10d %8d %8d %9.1f %12.2f %12.2f %12.1f %10d %10d\n", r.Mode, r.Nodes, r.DBFetches, r.DBServed, r.ScansMade, r.Shared, r.WallSeconds, r.ScanPhaseSeconds, r.ServiceCPUSeconds, r.ServiceHeapMiB, r.AbuseRequests, r.Refused)
	}
	out := map[string]any{"date": time.Now().UTC().Format(time.RFC3339), "images": images, "cores": runtime.NumCPU(), "results": results}
	data, _ := json.MarshalIndent(out, "", "  ")
	dir := filepath.Join("..", "..", "..", "..", "bench", "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scanner-fleet.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runFleet runs n nodes at once and waits for them all.
// With abusive, node 0 is a liar (lie) that knows the keys the honest nodes
// will ask about.
func runFleet(t *testing.T, bin workers, c *testcontainerd.Containerd, n int, shared, abusive bool, known []scanshare.Key) fleetResult {
	t.Helper()
	reg, err := fixture.ServeDB([]fixture.Advisory{
		{Release: "3.22", Package: "musl", ID: "CVE-2099-0001", Fixed: "1.2.5-r0", Severity: dbtypes.SeverityCritical},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	var env []string
	var verdicts *scanservice.Verdicts
	var served atomic.Int32
	var asked keySet
	var serviceURL string
	if shared {
		mirror := scandb.New(scandb.Options{Dir: t.TempDir(), Refresh: time.Hour, MaxAge: time.Hour, Backoff: time.Second, MaxBackoff: time.Second, Timeout: time.Minute})
		var db *scanshare.DB
		for deadline := time.Now().Add(time.Minute); db == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no DB copy within a minute")
			}
			db = mirror.Get(reg.Repo).DB
		}
		verdicts = scanservice.NewVerdicts(scanservice.VerdictOptions{Budget: 64 << 20, Lease: 10 * time.Minute, Grant: 4})
		handler := (&scanservice.Server{Verdicts: verdicts, Auth: anyNode{}, DBs: mirror, RetryAfter: time.Second, Log: logr.Discard(),
			Served: func(int64) { served.Add(1) }}).Handler()
		srv := httptest.NewServer(recordKeys(handler, &asked))
		defer srv.Close()
		serviceURL = srv.URL
		env = []string{scanshare.EnvService + "=" + srv.URL, scanshare.EnvJobUID + "=bench", scanshare.EnvDB + "=" + db.Digest}
		// Each fleet has a DB of its own: the liar knows this one's digest,
		// as a scanner's environment names it.
		for i := range known {
			known[i].DB = db.Digest
		}
	}

	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	peakHeap := base.HeapInuse
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peakHeap = max(peakHeap, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	summaries := make([]workerresult.Summary, n)
	phases := make([]float64, n)
	var wg sync.WaitGroup
	collect := make(chan struct{})
	first := 0
	if abusive {
		first = 1
	}
	for i := first; i < n; i++ {
		wg.Go(func() { summaries[i], phases[i] = runNode(t, bin, c, reg.Repo, i, env, collect) })
	}
	liarDone := make(chan struct{})
	var lies liar
	if abusive {
		go func() {
			defer close(liarDone)
			lies.run(t, serviceURL, known, collect, stop)
		}()
	} else {
		close(liarDone)
	}
	// Every node's scanner and remover start first and settle; then the
	// collectors all begin. On 2 cores, 100 nodes' processes starting at
	// once would otherwise starve the few nodes that scan: real nodes
	// start theirs on their own CPUs.
	waitIdle(t)
	start := time.Now()
	close(collect)
	wg.Wait()
	wall := time.Since(start)
	close(stop)
	<-sampled
	<-liarDone
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)

	r := fleetResult{Nodes: n, DBFetches: int(reg.Archives.Load()), DBServed: int(served.Load()), WallSeconds: wall.Seconds(), ScanPhaseSeconds: slices.Max(phases),
		keys: asked.list(), AbuseRequests: int(lies.requests.Load())}
	if verdicts != nil {
		st := verdicts.Stats()
		r.Refused, r.Overruled = st.Refused, st.Overruled
	}
	for _, s := range summaries[first:] {
		r.counts = append(r.counts, s.Counts)
		r.ScansMade += s.ScansMade
		r.Shared += s.VerdictsShared
		if s.ScansMade+s.VerdictsShared != images {
			t.Errorf("a node judged %d images by a scan and %d by a shared verdict, want %d in all", s.ScansMade, s.VerdictsShared, images)
		}
	}
	if shared {
		cpu := func(ru syscall.Rusage) float64 {
			return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
		r.ServiceCPUSeconds = cpu(after) - cpu(before)
		r.ServiceHeapMiB = float64(peakHeap-base.HeapInuse) / (1 << 20)
	}
	return r
}

// anyNode takes every token for the node it names.
type anyNode struct{}

func (anyNode) Scanner(_ context.Context, token, _ string) (scanservice.Scanner, error) {
	return scanservice.Scanner{Node: token, Pod: token, PodUID: token}, nil
}

// runNode runs one node's workers (the remover dry), its collector once
// collect is closed, and returns the scanner's summary and how long its
// scan phase took.
func runNode(t *testing.T, bin workers, c *testcontainerd.Containerd, repo string, i int, env []string, collect <-chan struct{}) (workerresult.Summary, float64) {
	t.Helper()
	dir, err := os.MkdirTemp("", "bench-node")
	if err != nil {
		t.Error(err)
		return workerresult.Summary{}, 0
	}
	defer os.RemoveAll(dir)
	token := filepath.Join(dir, "token")
	cfg := filepath.Join(dir, "config.yaml")
	doc := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\ncomponents:\n  scanner:\n    enabled: true\n    config: |\n      cacheDir: " +
		filepath.Join(dir, "cache") + "\n      dbRepo: " + repo + "\n      deleteEOLImages: false\n"
	for _, f := range []struct{ path, data string }{{token, fmt.Sprint("node-", i)}, {cfg, doc}} {
		if err := os.WriteFile(f.path, []byte(f.data), 0o600); err != nil {
			t.Error(err)
			return workerresult.Summary{}, 0
		}
	}
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Error(err)
		return workerresult.Summary{}, 0
	}
	common := []string{"--runtime-endpoint=" + c.Endpoint, "--shared-dir=" + shared}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	summary := filepath.Join(dir, "scanner-summary")
	var wg sync.WaitGroup
	var scanLog bytes.Buffer
	var scanErr error
	wg.Go(func() {
		<-collect
		_ = exec.CommandContext(ctx, bin.collector, append([]string{"--state-dir=" + filepath.Join(dir, "state"), "--min-age=0s"}, common...)...).Run()
	})
	wg.Go(func() {
		cmd := exec.CommandContext(ctx, bin.scanner, append([]string{"--config=" + cfg, "--summary-file=" + summary}, common...)...)
		cmd.Env = append(os.Environ(), env...)
		if len(env) > 0 {
			cmd.Env = append(cmd.Env, scanshare.EnvToken+"="+token)
		}
		cmd.Stderr = &scanLog
		scanErr = cmd.Run()
	})
	if err := exec.CommandContext(ctx, bin.remover, append([]string{"--dry-run", "--scanner=enabled", "--state-dir=" + filepath.Join(dir, "state-r"), "--min-age=0s"}, common...)...).Run(); err != nil {
		t.Errorf("remover: %v", err)
	}
	wg.Wait()
	if scanErr != nil {
		t.Errorf("scanner: %v\n%s", scanErr, scanLog.String())
		return workerresult.Summary{}, 0
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Error(err)
		return workerresult.Summary{}, 0
	}
	s, err := workerresult.Decode(data)
	if err != nil {
		t.Error(err)
	}
	_, seconds, _ := scanFinished(scanLog.Bytes())
	return s, seconds
}

// waitIdle waits until the machine's CPUs are at least 60% idle over two
// quarter-seconds in a row: the started workers are waiting for the
// collectors (a few hundred idle processes, polling for the hand-off and
// running their runtimes' timers, keep some CPU busy). It gives up after two minutes (then the figures include
// their start).
func waitIdle(t *testing.T) {
	t.Helper()
	sample := func() (idle, total uint64) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0
		}
		line, _, _ := strings.Cut(string(b), "\n")
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseUint(f, 10, 64)
			total += v
			if i == 3 || i == 4 { // idle, iowait
				idle += v
			}
		}
		return idle, total
	}
	quiet := 0
	idle0, total0 := sample()
	for deadline := time.Now().Add(2 * time.Minute); quiet < 2 && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		idle1, total1 := sample()
		if total1 > total0 && float64(idle1-idle0)/float64(total1-total0) >= 0.6 {
			quiet++
		} else {
			quiet = 0
		}
		idle0, total0 = idle1, total1
	}
	if quiet < 2 {
		t.Log("the workers did not settle within two minutes: the figures include their start")
	}
}
