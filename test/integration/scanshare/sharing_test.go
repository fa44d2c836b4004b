package scanshare_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/eraser-oss/eraser/internal/manager/scandb"
	"github.com/eraser-oss/eraser/internal/manager/scanservice"
	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/node/scanclient"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

const runUID = "6a3c1f0e-0000-4000-8000-000000000001"

// tokens authenticates "<pod>@<job UID>" as that pod on node "node-<pod>",
// for that job only.
type tokens struct{}

func (tokens) Scanner(_ context.Context, token, jobUID string) (scanservice.Scanner, error) {
	pod, job, ok := strings.Cut(token, "@")
	if !ok || job != jobUID {
		return scanservice.Scanner{}, fmt.Errorf("%w: token of another run", scanservice.ErrNotScanner)
	}
	return scanservice.Scanner{Node: "node-" + pod, Pod: pod, PodUID: "uid-" + pod}, nil
}

func serve(t *testing.T) (*scanservice.Verdicts, string) {
	t.Helper()
	v := scanservice.NewVerdicts(scanservice.VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2})
	srv := httptest.NewServer((&scanservice.Server{Verdicts: v, Auth: tokens{}, RetryAfter: time.Second, Log: logr.Discard()}).Handler())
	t.Cleanup(srv.Close)
	return v, srv.URL
}

// engine counts the scans of each image across the fleet.
type engine struct {
	mu      sync.Mutex
	scanned map[string]int
}

func (e *engine) Scan(_ context.Context, img handoff.Image) (scan.Report, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scanned[img.ImageID]++
	// The engine names the content it judged: a shared verdict is that
	// content's.
	if strings.HasSuffix(img.ImageID, "1") {
		return scan.Report{Content: img.ImageID, Findings: []scan.Finding{{ID: "CVE-1", Severity: "HIGH", Package: "musl"}}}, nil
	}
	return scan.Report{Content: img.ImageID}, nil
}

func scanner(t *testing.T, base, token string) *scanclient.Client {
	t.Helper()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return scanclient.New(base, runUID, file)
}

func sharing(svc scan.Service) scan.Sharing {
	return scan.Sharing{Service: svc, DB: "sha256:" + strings.Repeat("d", 64), Platform: "linux/amd64",
		Policy: scan.PolicyKey("test", scan.Policy{}), Patience: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestFleetScansEachImageOnce: nodes holding the same images, each with
// one of its own, scan every distinct image once between them (a
// vulnerable one twice: a second node confirms it before the rest remove
// it), and each node judges all of its images.
func TestFleetScansEachImageOnce(t *testing.T) {
	v, base := serve(t)
	const nodes, common = 8, 12
	e := &engine{scanned: map[string]int{}}
	var wg sync.WaitGroup
	judged := make([][]scan.Judgement, nodes)
	for n := range nodes {
		var imgs []handoff.Image
		for i := range common {
			imgs = append(imgs, handoff.Image{ImageID: fmt.Sprintf("sha256:%064x", i), Names: []string{fmt.Sprint("common-", i)}})
		}
		imgs = append(imgs, handoff.Image{ImageID: fmt.Sprintf("sha256:%064x", 1000+n), Names: []string{fmt.Sprint("own-", n)}})
		wg.Go(func() {
			c := scanner(t, base, fmt.Sprint("pod", n, "@", runUID))
			judged[n] = scan.RunShared(context.Background(), e, imgs, scan.Policy{}, 0, time.Hour, sharing(c))
		})
	}
	wg.Wait()
	if len(e.scanned) != common+nodes {
		t.Errorf("%d distinct images scanned, want %d", len(e.scanned), common+nodes)
	}
	vulnerableID := fmt.Sprintf("sha256:%064x", 1)
	for id, n := range e.scanned {
		if want := map[bool]int{true: 2, false: 1}[id == vulnerableID]; n != want {
			t.Errorf("%s scanned %d times, want %d", id, n, want)
		}
	}
	shared := 0
	for n, js := range judged {
		if len(js) != common+1 {
			t.Fatalf("node %d judged %d images, want %d", n, len(js), common+1)
		}
		for _, j := range js {
			if j.Verdict != scan.Vulnerable && j.Verdict != scan.Clean {
				t.Errorf("node %d: %s judged %s", n, j.Image.Names[0], j.Verdict)
			}
			if j.From != nil {
				shared++
			}
		}
	}
	if want := nodes*common - common - 1; shared != want {
		t.Errorf("%d verdicts taken from other nodes, want %d", shared, want)
	}
	if st := v.Stats(); st.Verdicts != common+nodes || st.Refused != 0 || st.Confirmed != 1 {
		t.Errorf("store %+v, want %d verdicts, 1 confirmed", st, common+nodes)
	}
}

// TestForgedVerdictsRefused: a request without a token, or with a token of
// another run, adds nothing; a scanner refused that way scans itself.
func TestForgedVerdictsRefused(t *testing.T) {
	v, base := serve(t)
	clean := scanshare.Shared{Key: scanshare.Key{Digest: fmt.Sprintf("sha256:%064x", 7), Platform: "linux/amd64",
		DB: "sha256:" + strings.Repeat("d", 64), Policy: strings.Repeat("0", 64)}}
	clean.Scan.Verdict = "clean"
	for name, token := range map[string]string{
		"no token":               "",
		"a token of another run": "pod1@another-run",
	} {
		t.Run(name, func(t *testing.T) {
			c := scanner(t, base, token)
			_, err := c.Share(context.Background(), scanshare.ShareRequest{Verdicts: []scanshare.Shared{clean}})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprint(http.StatusUnauthorized)) && !strings.Contains(err.Error(), fmt.Sprint(http.StatusForbidden)) {
				t.Fatalf("share: %v, want 401 or 403", err)
			}
			e := &engine{scanned: map[string]int{}}
			js := scan.RunShared(context.Background(), e, []handoff.Image{{ImageID: clean.Key.Digest, Names: []string{"x"}}}, scan.Policy{}, 0, time.Hour, sharing(c))
			if len(js) != 1 || js[0].Verdict != scan.Clean || e.scanned[clean.Key.Digest] != 1 {
				t.Fatalf("a refused scanner did not scan itself: %+v", js)
			}
		})
	}
	if n := v.Stats().Verdicts; n != 0 {
		t.Fatalf("the store holds %d verdicts from refused requests", n)
	}
}

// archives serves files of a directory by digest; the digest of f's is
// on its way.
type archives string

var pendingArchive = "sha256:" + strings.Repeat("f", 64)

func (a archives) Open(digest string) (*os.File, error) {
	if digest == pendingArchive {
		return nil, fmt.Errorf("%w: from registry.example/trivy-db", scandb.ErrFetching)
	}
	return os.Open(filepath.Join(string(a), strings.Replace(digest, ":", "-", 1)))
}

// TestServeDB: a scanner of the run downloads the run's archive and checks
// it; a request without the run's token gets nothing, an archive that is
// not the one named is refused by the scanner, and one on its way is asked
// for again.
func TestServeDB(t *testing.T) {
	dir := t.TempDir()
	content := []byte("the DB archive")
	sum := sha256.Sum256(content)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, strings.Replace(digest, ":", "-", 1)), content, 0o600); err != nil {
		t.Fatal(err)
	}
	// Another digest's file holding the same bytes: what a tampered
	// service would send.
	other := "sha256:" + strings.Repeat("e", 64)
	if err := os.WriteFile(filepath.Join(dir, strings.Replace(other, ":", "-", 1)), content, 0o600); err != nil {
		t.Fatal(err)
	}
	var served []int64
	v := scanservice.NewVerdicts(scanservice.VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2})
	srv := httptest.NewServer((&scanservice.Server{Verdicts: v, Auth: tokens{}, DBs: archives(dir), Served: func(n int64) { served = append(served, n) }, Log: logr.Discard()}).Handler())
	defer srv.Close()

	var got bytes.Buffer
	if n, err := scanner(t, srv.URL, "pod1@"+runUID).DB(context.Background(), digest, &got); err != nil || n != int64(len(content)) || got.String() != string(content) {
		t.Fatalf("download: %d bytes, %v: %q", n, err, got.String())
	}
	if _, err := scanner(t, srv.URL, "pod1@"+runUID).DB(context.Background(), other, io.Discard); err == nil || !strings.Contains(err.Error(), "not the run's") {
		t.Fatalf("an archive of another digest: %v, want it refused", err)
	}
	if _, err := scanner(t, srv.URL, "pod1@another-run").DB(context.Background(), digest, io.Discard); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("another run's scanner: %v, want 403", err)
	}
	// A new leader fetching the archive of a run its predecessor started:
	// the scanner is told to ask again.
	if _, err := scanner(t, srv.URL, "pod1@"+runUID).DB(context.Background(), pendingArchive, io.Discard); !scanclient.Transient(err) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("an archive on its way: %v, want 503, asked again", err)
	}
	if len(served) != 2 {
		t.Fatalf("served %v, want the two downloads of the run's scanner", served)
	}
}

// dying is a scanner's client whose service is killed right after its
// first answer.
type dying struct {
	*scanclient.Client
	kill func()
	once sync.Once
}

func (d *dying) Claim(ctx context.Context, req scanshare.ClaimRequest) (scanshare.ClaimResponse, error) {
	resp, err := d.Client.Claim(ctx, req)
	d.once.Do(d.kill)
	return resp, err
}

// TestServiceKilledMidRun: the service gone after a scanner's first claim,
// the scanner judges every image all the same, scanning what it was not
// handed itself.
func TestServiceKilledMidRun(t *testing.T) {
	v := scanservice.NewVerdicts(scanservice.VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2})
	srv := httptest.NewServer((&scanservice.Server{Verdicts: v, Auth: tokens{}, RetryAfter: time.Second, Log: logr.Discard()}).Handler())
	defer srv.Close()
	var imgs []handoff.Image
	for i := range 6 {
		imgs = append(imgs, handoff.Image{ImageID: fmt.Sprintf("sha256:%064x", i), Names: []string{fmt.Sprint("image-", i)}})
	}
	e := &engine{scanned: map[string]int{}}
	c := &dying{Client: scanner(t, srv.URL, "pod1@"+runUID), kill: func() {
		srv.CloseClientConnections()
		srv.Close()
	}}
	js := scan.RunShared(context.Background(), e, imgs, scan.Policy{}, 0, time.Hour, sharing(c))
	if len(js) != len(imgs) {
		t.Fatalf("%d judgements, want %d", len(js), len(imgs))
	}
	for _, j := range js {
		if j.Verdict != scan.Vulnerable && j.Verdict != scan.Clean {
			t.Errorf("%s: %s", j.Image.Names[0], j.Verdict)
		}
	}
	if len(e.scanned) != len(imgs) {
		t.Errorf("scanned %d images, want all %d", len(e.scanned), len(imgs))
	}
}
