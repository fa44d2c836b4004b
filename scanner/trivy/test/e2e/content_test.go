//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/ctrdimage"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

// movingService is a scan service that hands every key to the scanner and
// records the verdicts shared; on the first claim, which comes after the
// collector listed the node's images and before any scan, it runs moved.
type movingService struct {
	moved  func() error
	once   sync.Once
	mu     sync.Mutex
	err    error
	shared map[string]string // digest → verdict
}

func (s *movingService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, scanshare.ClaimPath):
		var req scanshare.ClaimRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.once.Do(func() {
			err := s.moved()
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		})
		_ = json.NewEncoder(w).Encode(scanshare.ClaimResponse{Scan: req.Keys})
	case strings.HasPrefix(r.URL.Path, scanshare.SharePath):
		var req scanshare.ShareRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		for _, v := range req.Verdicts {
			s.shared[v.Key.Digest] = v.Scan.Verdict
		}
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(scanshare.ShareResponse{Stored: len(req.Verdicts)})
	default:
		http.NotFound(w, r)
	}
}

// TestTagMovedBeforeTheScan: images side-loaded with "ctr images import"
// (kind load, air-gapped nodes) that have no record under their ID are
// found by the scanner by name; a name imported again as other content
// between the collector's listing and the scan must not lead the scanner
// to judge that content as the listed image and share the verdict under
// its ID. The image app keeps a second name for its own content, and is
// judged by it; the image solo has none left, and is not scanned (kept).
func TestTagMovedBeforeTheScan(t *testing.T) {
	testcontainerd.Require(t)
	n := onContainerd(t)
	musl := func(v string) fixture.Package { return fixture.Package{Name: "musl", Version: v} }
	alpine := func(id, muslVersion string, tags ...string) testimage.Image {
		files := fixture.AlpineFiles("3.22.1", musl(muslVersion))
		files["etc/fixture-tag"] = []byte(id)
		return testimage.Image{Tags: tags, Files: files}
	}
	const (
		appDev  = "example.com/app:dev"
		appV1   = "example.com/app:v1"
		soloDev = "example.com/solo:dev"
	)
	// The listed images are clean; what their moved names lead to, is
	// vulnerable.
	n.ctrd.ImportUnpulled(t, alpine("app", "1.2.5-r0", appDev, appV1), alpine("solo", "1.2.5-r0", soloDev))
	ids := n.rt.ImageIDs(t)
	app, solo := ids[appDev], ids[soloDev]
	if app == "" || solo == "" || ids[appV1] != app {
		t.Fatalf("the node's images: %v", ids)
	}
	// The CRI plugin records each image under its ID as well, once it has
	// seen the import: the scanner then opens the image by ID, whatever its
	// names became. Until it has, or when that record is gone (removed by
	// hand or by other tools), the names are all there is; removed here,
	// for good, once the CRI plugin listed both images under their names.
	n.ctrd.Ctr(t, "images", "rm", app, solo)
	time.Sleep(200 * time.Millisecond)
	if refs := n.ctrd.Ctr(t, "images", "ls", "-q"); strings.Contains(refs, app) || strings.Contains(refs, solo) {
		t.Fatalf("the images are recorded under their IDs again:\n%s", refs)
	}
	if ids := n.rt.ImageIDs(t); ids[appDev] != app || ids[appV1] != app || ids[soloDev] != solo {
		t.Fatalf("the node's images without the ID records: %v", ids)
	}
	archive := filepath.Join(t.TempDir(), "moved.tar")
	if err := testimage.WriteArchive(archive, []testimage.Image{alpine("app moved", "1.2.4-r2", appDev), alpine("solo moved", "1.2.4-r2", soloDev)}); err != nil {
		t.Fatal(err)
	}
	svc := &movingService{shared: map[string]string{}, moved: func() error {
		out, err := exec.Command("ctr", "--address", n.ctrd.Socket, "--namespace", "k8s.io", "images", "import", archive).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr images import: %w\n%s", err, out)
		}
		return nil
	}}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("node-0"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(scanshare.EnvService, srv.URL)
	t.Setenv(scanshare.EnvJobUID, "run-1")
	t.Setenv(scanshare.EnvToken, token)
	cfg := eraserConfig(t, fmt.Sprintf("cacheDir: %s\nskipDBUpdate: true", seededDB(t)))
	collector, scanner, remover := pod(t, n, cfg, workertest.ExclusionDir(t))
	if svc.err != nil {
		t.Fatal(svc.err)
	}
	if collector.Code != 0 || scanner.Code != 0 || remover.Code != 0 {
		t.Fatalf("exit codes collector %d scanner %d remover %d\nscanner:\n%s", collector.Code, scanner.Code, remover.Code, scanner.Stderr)
	}
	after := n.rt.ImageIDs(t)
	if after[appDev] == app || after[soloDev] == solo {
		t.Fatalf("the names did not move: %v", after)
	}

	// Only app's own content was judged and shared under its ID; nothing
	// under solo's.
	if diff := cmp.Diff(map[string]string{app: "clean"}, svc.shared); diff != "" {
		t.Errorf("verdicts shared (-want +got):\n%s", diff)
	}
	verdicts, details := map[string]string{}, map[string]string{}
	entries, _, err := nodereport.ParseLog(strings.NewReader(scanner.Stderr), 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Scan != nil {
			verdicts[e.ID], details[e.ID] = e.Scan.Verdict, e.Detail
		}
	}
	if diff := cmp.Diff(map[string]string{app: "clean", solo: "not scanned"}, verdicts); diff != "" {
		t.Errorf("the scanner's verdicts by image ID (-want +got):\n%s\nscanner:\n%s", diff, scanner.Stderr)
	}
	if !strings.Contains(details[solo], scan.ErrOtherContent.Error()) {
		t.Errorf("solo's verdict says %q, want why it was not scanned", details[solo])
	}
	// The listed app image is still on the node under the name that kept
	// its content.
	if after[appV1] != app {
		t.Errorf("%s is %q after the run, want the listed image %s", appV1, after[appV1], app)
	}

	// The content store itself: the image is opened by the name that still
	// leads to its content, and not at all when none does.
	store, err := ctrdimage.Dial(n.ctrd.Socket, ctrdimage.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	img, err := store.Open(context.Background(), handoff.Image{ImageID: app, Names: []string{appDev, appV1}})
	if err != nil {
		t.Fatalf("opening %s: %v", app, err)
	}
	if h, err := img.ConfigName(); err != nil || h.String() != app {
		t.Errorf("opened %s for %s (%v)", h, app, err)
	}
	if img, err := store.Open(context.Background(), handoff.Image{ImageID: solo, Names: []string{soloDev}}); !errors.Is(err, scan.ErrOtherContent) {
		t.Errorf("opening %s, whose only name moved: %v, %v; want ErrOtherContent", solo, img, err)
	}
}
