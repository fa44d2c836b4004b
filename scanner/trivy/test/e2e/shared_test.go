//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/manager/scandb"
	"github.com/eraser-oss/eraser/internal/manager/scanservice"
	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

// nodeTokens authenticates the token "<node>" as that node's scanner: the
// API server's TokenReview is the control-plane tier's to prove.
type nodeTokens struct{}

func (nodeTokens) Scanner(_ context.Context, token, _ string) (scanservice.Scanner, error) {
	if !strings.HasPrefix(token, "node-") {
		return scanservice.Scanner{}, scanservice.ErrNotScanner
	}
	return scanservice.Scanner{Node: token, Pod: "eraser-" + token, PodUID: "uid-" + token}, nil
}

// TestNodesShareOneDBAndOneScanPerImage: two nodes on real runtimes
// (containerd, then CRI-O) holding the same images, each with its own
// workers, run as the scan service's scanners: the DB's archive is
// downloaded from its repository once, by the manager's copy; the first
// node scans every image; the second judges each image it holds too by the
// first node's verdict, which its report says, except those the first found
// vulnerable or at end of life, which it scans again to confirm (a removal
// verdict reaches a third node only confirmed); and both judge alike.
func TestNodesShareOneDBAndOneScanPerImage(t *testing.T) {
	reg, mirror, db := managerDBCopy(t)
	repo, archives := reg.Repo, &reg.Archives
	verdicts := scanservice.NewVerdicts(scanservice.VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2})
	srv := httptest.NewServer((&scanservice.Server{Verdicts: verdicts, Auth: nodeTokens{}, DBs: mirror, RetryAfter: time.Second, Log: logr.Discard()}).Handler())
	t.Cleanup(srv.Close)

	var order []noderuntime.Runtime
	for _, name := range []string{"containerd", "crio"} {
		for _, rt := range noderuntime.Runtimes {
			if rt.Name == name {
				order = append(order, rt)
			}
		}
	}
	type result struct {
		made, shared int
		verdicts     map[string]string
		from         map[string]string
		archive      string
		// ids are the node's image IDs by name: only the same content
		// shares a verdict (the static image's bytes are random per node).
		ids map[string]string
	}
	var results []result
	for i, rt := range order {
		n := seedOn(t, onRuntime(t, rt))
		ids := n.rt.ImageIDs(t)
		node := fmt.Sprint("node-", i)
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte(node), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv(scanshare.EnvService, srv.URL)
		t.Setenv(scanshare.EnvJobUID, "run-1")
		t.Setenv(scanshare.EnvToken, token)
		t.Setenv(scanshare.EnvDB, db.Digest)
		// dbRepo is the repository, as the configuration says; the scanner
		// must not use it.
		cfg := eraserConfig(t, fmt.Sprintf("cacheDir: %s\ndbRepo: %s\ndeleteEOLImages: false", t.TempDir(), repo))
		collector, scanner, remover := pod(t, n, cfg, workertest.ExclusionDir(t, "example.com/keep/*"))
		if collector.Code != 0 || scanner.Code != 0 || remover.Code != 0 {
			t.Fatalf("%s on %s: exit codes collector %d scanner %d remover %d\nscanner:\n%s", node, rt.Name, collector.Code, scanner.Code, remover.Code, scanner.Stderr)
		}
		r := result{made: scanner.Summary.ScansMade, shared: scanner.Summary.VerdictsShared, verdicts: verdictsOf(scanner), from: map[string]string{}, ids: ids}
		if scanner.Summary.ScanDB != nil {
			r.archive = scanner.Summary.ScanDB.Archive
		}
		entries, _, err := nodereport.ParseLog(strings.NewReader(scanner.Stderr), 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Scan != nil && e.Scan.From != nil {
				r.from[e.Image] = e.Scan.From.Node
			}
		}
		results = append(results, r)
	}
	if got := archives.Load(); got != 1 {
		t.Errorf("the DB's archive was downloaded %d times from its repository, want once (by the manager's copy)", got)
	}
	first, second := results[0], results[len(results)-1]
	if first.made == 0 || first.shared != 0 {
		t.Errorf("the first node made %d scans and took %d verdicts, want every image scanned there", first.made, first.shared)
	}
	if len(results) > 1 {
		scannedFirst := map[string]bool{}
		for image := range first.verdicts {
			d, _ := scanshare.Digest(first.ids[image])
			scannedFirst[d] = true
		}
		want, wantFrom := 0, map[string]string{}
		for image, v := range second.verdicts {
			if d, _ := scanshare.Digest(second.ids[image]); scannedFirst[d] && v != "vulnerable" && v != "end-of-life" {
				want++
				wantFrom[image] = "node-0"
			}
		}
		if want == 0 {
			t.Fatalf("the two nodes hold no image of the same content: %v, %v", first.ids, second.ids)
		}
		if second.shared != want || second.made != len(second.verdicts)-want {
			t.Errorf("the second node made %d scans and took %d verdicts, want %d and %d", second.made, second.shared, len(second.verdicts)-want, want)
		}
		if diff := cmp.Diff(wantFrom, second.from); diff != "" {
			t.Errorf("the second node's verdicts made on the first (-want +got):\n%s", diff)
		}
	}
	for i, r := range results {
		if diff := cmp.Diff(first.verdicts, r.verdicts); diff != "" {
			t.Errorf("node %d's verdicts (-first +this):\n%s", i, diff)
		}
		if r.archive != db.Digest {
			t.Errorf("node %d judged with archive %q, want the run's %s", i, r.archive, db.Digest)
		}
	}
	if st := verdicts.Stats(); st.Verdicts != first.made+second.made-st.Confirmed || st.Served != second.shared || st.Disputed != 0 {
		t.Errorf("the service holds %+v, want %d verdicts, %d served, none disputed", st, first.made+second.made-st.Confirmed, second.shared)
	}
}

// managerDBCopy is the manager's copy of the DB from a registry on loopback,
// fetched once.
func managerDBCopy(t *testing.T) (*fixture.DBRegistry, *scandb.Mirror, *scanshare.DB) {
	t.Helper()
	reg, err := fixture.ServeDB(advisories)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	mirror := scandb.New(scandb.Options{Dir: t.TempDir(), Refresh: time.Hour, MaxAge: time.Hour, Backoff: time.Second, MaxBackoff: time.Second, Timeout: time.Minute})
	deadline := time.Now().Add(time.Minute)
	for {
		st := mirror.Get(reg.Repo)
		if st.Err != nil {
			t.Fatalf("the manager's copy: %v", st.Err)
		}
		if st.DB != nil {
			return reg, mirror, st.DB
		}
		if time.Now().After(deadline) {
			t.Fatal("no DB copy within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestScannerWaitsForARestartingService: the scanner starts while the
// manager restarts (nothing listens at the service's address); it asks for
// the run's DB again until the manager serves it, then judges the node's
// images with it. Restarted in its pod, the manager comes back at the same
// address with the same copy; replaced by a new pod, it serves at a new
// address, which it announces on the worker pods and the kubelet projects
// into the file the scanner reads.
func TestScannerWaitsForARestartingService(t *testing.T) {
	for name, moved := range map[string]bool{"same address": false, "new pod, new address": true} {
		t.Run(name, func(t *testing.T) {
			_, mirror, db := managerDBCopy(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			back := make(chan error, 1)
			srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: (&scanservice.Server{
				Verdicts: scanservice.NewVerdicts(scanservice.VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2}),
				Auth:     nodeTokens{}, DBs: mirror, RetryAfter: time.Second, Log: logr.Discard()}).Handler()}
			t.Cleanup(func() { _ = srv.Close() })
			n := seedOn(t, onRuntime(t, noderuntime.Runtimes[0]))
			token := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(token, []byte("node-0"), 0o600); err != nil {
				t.Fatal(err)
			}
			serviceFile := filepath.Join(t.TempDir(), "service")
			t.Setenv(scanshare.EnvService, "http://"+addr)
			t.Setenv(scanshare.EnvServiceFile, serviceFile)
			t.Setenv(scanshare.EnvJobUID, "run-1")
			t.Setenv(scanshare.EnvToken, token)
			t.Setenv(scanshare.EnvDB, db.Digest)
			cfg := eraserConfig(t, fmt.Sprintf("cacheDir: %s\ndeleteEOLImages: false", t.TempDir()))
			// The service comes back 3 s after the workers start: the
			// scanner, which starts in a fraction of that, has asked at
			// least once by then, and asks again after 1 s and 2 s.
			go func() {
				time.Sleep(3 * time.Second)
				at := addr
				if moved {
					at = "127.0.0.1:0"
				}
				ln, err := net.Listen("tcp", at)
				if err == nil && moved {
					// As the kubelet does: the whole file at once.
					tmp := serviceFile + ".tmp"
					if err = os.WriteFile(tmp, []byte("http://"+ln.Addr().String()), 0o644); err == nil {
						err = os.Rename(tmp, serviceFile)
					}
				}
				back <- err
				if err == nil {
					_ = srv.Serve(ln)
				}
			}()
			collector, scanner, remover := pod(t, n, cfg, workertest.ExclusionDir(t, "example.com/keep/*"))
			if err := <-back; err != nil {
				t.Fatalf("the service could not listen again: %v", err)
			}
			if collector.Code != 0 || scanner.Code != 0 || remover.Code != 0 {
				t.Fatalf("exit codes collector %d scanner %d remover %d\nscanner:\n%s", collector.Code, scanner.Code, remover.Code, scanner.Stderr)
			}
			if !strings.Contains(scanner.Stderr, "asking again") {
				t.Errorf("the scanner's log does not say it asked again:\n%s", scanner.Stderr)
			}
			if !strings.Contains(scanner.Stderr, "vulnerability DB from the scan service") {
				t.Errorf("the scanner's log does not say it installed the run's DB from the service:\n%s", scanner.Stderr)
			}
			if a := scanner.Summary.ScanDB; a == nil || a.Archive != db.Digest {
				t.Errorf("the scanner judged with %+v, want the run's archive %s", a, db.Digest)
			}
			if got := verdictsOf(scanner)[vulnerable]; got != "vulnerable" {
				t.Errorf("verdict on %s: %q, want vulnerable", vulnerable, got)
			}
		})
	}
}

// verdictsOf reads a scanner's verdicts from its log, every one of them
// (the summary keeps as many as fit).
func verdictsOf(scanner run) map[string]string {
	out := map[string]string{}
	entries, _, _ := nodereport.ParseLog(strings.NewReader(scanner.Stderr), 1000)
	for _, e := range entries {
		if e.Scan != nil {
			out[e.Image] = e.Scan.Verdict
		}
	}
	return out
}

// TestScannerWithoutTheServiceKeepsEveryImage: a scanner that cannot reach
// the scan service has neither another node's verdict nor the run's DB to
// judge with: it removes nothing, and its report says why of each image.
func TestScannerWithoutTheServiceKeepsEveryImage(t *testing.T) {
	n := seedOn(t, onRuntime(t, noderuntime.Runtimes[0]))
	before := present(t, n)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("node-0"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(scanshare.EnvService, "http://"+addr)
	t.Setenv(scanshare.EnvJobUID, "run-1")
	t.Setenv(scanshare.EnvToken, token)
	t.Setenv(scanshare.EnvDB, "sha256:"+strings.Repeat("d", 64))
	t.Setenv(scanshare.EnvDBSize, "1048576")
	cfg := eraserConfig(t, fmt.Sprintf("cacheDir: %s\ndbDownloadTimeout: 3s", t.TempDir()))
	collector, scanner, remover := pod(t, n, cfg, workertest.ExclusionDir(t))
	if collector.Code != 0 || scanner.Code != 1 || remover.Code != 0 {
		t.Fatalf("exit codes collector %d scanner %d remover %d, want the scanner's 1 (it could not judge)\nscanner:\n%s", collector.Code, scanner.Code, remover.Code, scanner.Stderr)
	}
	if diff := cmp.Diff(before, present(t, n)); diff != "" {
		t.Errorf("images on the node (-before +after):\n%s", diff)
	}
	entries, _, err := nodereport.ParseLog(strings.NewReader(scanner.Stderr), 1000)
	if err != nil {
		t.Fatal(err)
	}
	judged := 0
	for _, e := range entries {
		if e.Scan == nil {
			continue
		}
		judged++
		if e.Scan.Verdict != "not scanned" || e.Scan.Remove || !strings.Contains(e.Detail, "cannot judge") || !strings.Contains(e.Detail, "scan service") {
			t.Errorf("%s: %s, remove %v, %q; want not scanned and kept, saying the run's DB did not come from the scan service", e.Image, e.Scan.Verdict, e.Scan.Remove, e.Detail)
		}
	}
	if judged == 0 {
		t.Errorf("no verdict in the scanner's log:\n%s", scanner.Stderr)
	}
	if !strings.Contains(scanner.Stderr, "this node cannot judge with the run's vulnerability DB") {
		t.Errorf("the scanner's log does not say it cannot judge:\n%s", scanner.Stderr)
	}
}
