//go:build bench && linux

// Package bench measures the Trivy scanner against the Trivy CLI on the
// same 20 fixture images in the same real containerd, with the same
// offline DB: per-image time and peak memory. Run with `make bench-scanner`;
// the figures are printed and written to bench/results/scanner.json.
package bench

import (
	"bufio"
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
	"sync"
	"syscall"
	"testing"
	"time"

	dbtypes "github.com/aquasecurity/trivy-db/pkg/types"

	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

const images = 20

// rounds: each figure is the median of this many runs.
const rounds = 3

type result struct {
	Method         string  `json:"method"`
	Images         int     `json:"images"`
	PerImageMillis float64 `json:"perImageMillis"`
	TotalSeconds   float64 `json:"totalSeconds"`
	PeakRSSMiB     float64 `json:"peakRssMiB"`
	Note           string  `json:"note,omitempty"`
}

func TestScannerBench(t *testing.T) {
	testcontainerd.Require(t)
	trivy := os.Getenv("TRIVY_BIN")
	if trivy == "" {
		t.Fatal("TRIVY_BIN is not set (make bench-scanner builds the CLI with hack/build-trivy.sh)")
	}
	bin := buildWorkers(t)

	c := testcontainerd.Start(t)
	var refs []string
	var imgs []testimage.Image
	for i := range images {
		ref := fmt.Sprintf("bench.local/app-%02d:1", i)
		refs = append(refs, ref)
		imgs = append(imgs, benchImage(ref, i))
	}
	c.Import(t, imgs...)
	cache := t.TempDir()
	if err := fixture.WriteDB(cache, []fixture.Advisory{
		{Release: "3.22", Package: "musl", ID: "CVE-2099-0001", Fixed: "1.2.5-r0", Severity: dbtypes.SeverityCritical},
		{Release: "3.22", Package: "zlib", ID: "CVE-2099-0002", Fixed: "1.3.1-r0", Severity: dbtypes.SeverityHigh},
		{Release: "3.22", Package: "openssl", ID: "CVE-2099-0003", Fixed: "3.3.2-r0", Severity: dbtypes.SeverityMedium},
	}); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	doc := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\ncomponents:\n  scanner:\n    enabled: true\n    config: |\n      cacheDir: " + cache + "\n      skipDBUpdate: true\n"
	if err := os.WriteFile(cfgFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}

	var ours, cli []result
	for range rounds {
		ours = append(ours, runOurs(t, bin, c, cfgFile))
		cli = append(cli, runCLI(t, trivy, c, cache, refs))
	}
	results := []result{median(ours), median(cli)}
	results[0].Method, results[0].Note = "eraser trivy-scanner (library, content store)", "scan phase; peak RSS of the whole scanner process"
	results[1].Method, results[1].Note = "trivy CLI per image (--image-src containerd)", "one process per image, as upstream runs it; peak RSS of the largest"
	ratio := results[0].PerImageMillis / results[1].PerImageMillis
	fmt.Printf("\n%-48s %8s %12s %10s %10s\n", "method", "images", "ms/image", "total s", "peak MiB")
	for _, r := range results {
		fmt.Printf("%-48s %8d %12.1f %10.2f %10.1f\n", r.Method, r.Images, r.PerImageMillis, r.TotalSeconds, r.PeakRSSMiB)
	}
	fmt.Printf("time ratio ours/CLI: %.2f (goal <= 1.10)\n", ratio)
	out := map[string]any{"date": time.Now().UTC().Format(time.RFC3339), "rounds": rounds, "results": results, "ratio": ratio}
	data, _ := json.MarshalIndent(out, "", "  ")
	dir := filepath.Join("..", "..", "..", "..", "bench", "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scanner.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// benchImage is an Alpine-like image with a few hundred files besides its
// package database, so that reading layers costs what it costs.
func benchImage(ref string, i int) testimage.Image {
	pkgs := []fixture.Package{{Name: "musl", Version: "1.2.4-r2"}, {Name: "busybox", Version: "1.36.1-r0"},
		{Name: "zlib", Version: "1.3.0-r0"}, {Name: "openssl", Version: "3.3.1-r0"}, {Name: "ca-certificates", Version: "20240705-r0"}}
	if i%2 == 1 {
		pkgs[0].Version = "1.2.5-r0"
	}
	files := fixture.AlpineFiles("3.22.1", pkgs...)
	for f := range 400 {
		data := make([]byte, 2048)
		_, _ = rand.Read(data)
		files[fmt.Sprintf("usr/share/bench/%03d.bin", f)] = data
	}
	files["etc/bench-ref"] = []byte(ref)
	return testimage.Image{Tags: []string{ref}, Files: files}
}

func runOurs(t *testing.T, bin workers, c *testcontainerd.Containerd, cfgFile string) result {
	t.Helper()
	shared, err := os.MkdirTemp("", "bench-shared")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	common := []string{"--runtime-endpoint=" + c.Endpoint, "--shared-dir=" + shared}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var scanLog bytes.Buffer
	var scanErr error
	summary := filepath.Join(shared, "scanner-summary")
	wg.Go(func() { _ = exec.CommandContext(ctx, bin.collector, common...).Run() })
	wg.Go(func() {
		cmd := exec.CommandContext(ctx, bin.scanner, append([]string{"--config=" + cfgFile, "--summary-file=" + summary}, common...)...)
		cmd.Stderr = &scanLog
		scanErr = cmd.Run()
	})
	if err := exec.CommandContext(ctx, bin.remover, append([]string{"--dry-run", "--scanner=enabled"}, common...)...).Run(); err != nil {
		t.Fatalf("remover: %v", err)
	}
	wg.Wait()
	if scanErr != nil {
		t.Fatalf("scanner: %v\n%s", scanErr, scanLog.String())
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	s, err := workerresult.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	scanned, seconds := scanPhase(t, scanLog.Bytes())
	if scanned != images {
		t.Fatalf("the scanner scanned %d images, want %d:\n%s", scanned, images, scanLog.String())
	}
	return result{Images: scanned, PerImageMillis: seconds * 1000 / float64(scanned), TotalSeconds: seconds, PeakRSSMiB: float64(s.PeakRSSBytes) / (1 << 20)}
}

// scanPhase reads the scanner's "scan finished" log line.
func scanPhase(t *testing.T, log []byte) (int, float64) {
	t.Helper()
	images, seconds, ok := scanFinished(log)
	if !ok {
		t.Fatalf("no \"scan finished\" line in the scanner's log:\n%s", log)
	}
	return images, seconds
}

// scanFinished reads the images and seconds of the scanner's "scan
// finished" log line.
func scanFinished(log []byte) (images int, seconds float64, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string  `json:"msg"`
			Images  int     `json:"images"`
			Seconds float64 `json:"seconds"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "scan finished" {
			return line.Images, line.Seconds, true
		}
	}
	return 0, 0, false
}

func runCLI(t *testing.T, trivy string, c *testcontainerd.Containerd, cache string, refs []string) result {
	t.Helper()
	var total time.Duration
	var peak int64
	for _, ref := range refs {
		cmd := exec.Command(trivy, "image", "--image-src", "containerd", "--cache-dir", cache,
			"--skip-db-update", "--skip-java-db-update", "--offline-scan", "--skip-version-check", "--disable-telemetry",
			"--scanners", "vuln", "--format", "json", "--quiet", ref)
		cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+strings.TrimPrefix(c.Endpoint, "unix://"), "CONTAINERD_NAMESPACE=k8s.io")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("trivy %s: %v\n%s", ref, err, stderr.String())
		}
		total += time.Since(start)
		if !bytes.Contains(stdout.Bytes(), []byte("musl")) {
			t.Fatalf("trivy found no packages in %s:\n%s", ref, stdout.String())
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > peak {
			peak = ru.Maxrss
		}
	}
	return result{Images: len(refs), PerImageMillis: total.Seconds() * 1000 / float64(len(refs)), TotalSeconds: total.Seconds(), PeakRSSMiB: float64(peak) / 1024}
}

func median(rs []result) result {
	slices.SortFunc(rs, func(a, b result) int {
		switch {
		case a.PerImageMillis < b.PerImageMillis:
			return -1
		case a.PerImageMillis > b.PerImageMillis:
			return 1
		}
		return 0
	})
	return rs[len(rs)/2]
}

// The scanner and the operator's collector and remover, as they ship,
// each built with its module's experiments.
var (
	scannerCommand  = gobuild.InModule(gobuild.Scanner, "cmd/trivy-scanner")
	operatorWorkers = gobuild.New("cmd/collector", "cmd/remover")
)

// TestMain removes the binaries the benchmarks built.
func TestMain(m *testing.M) {
	code := m.Run()
	scannerCommand.Remove()
	operatorWorkers.Remove()
	os.Exit(code)
}

// workers are the paths of the worker binaries.
type workers struct {
	collector, scanner, remover string
}

func buildWorkers(t *testing.T) workers {
	t.Helper()
	dir := operatorWorkers.Dir(t)
	return workers{collector: filepath.Join(dir, "collector"), scanner: scannerCommand.Path(t), remover: filepath.Join(dir, "remover")}
}
