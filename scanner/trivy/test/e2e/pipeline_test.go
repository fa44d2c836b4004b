//go:build linux

// Package e2e runs the scheduled pipeline as a worker pod runs it: the
// collector, the Trivy scanner and the remover as three processes sharing a
// hand-off directory, against a real containerd holding fixture images, with
// a vulnerability DB built in the test. Nothing leaves the machine.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dbtypes "github.com/aquasecurity/trivy-db/pkg/types"
	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

// The scanner and the operator's collector and remover, as they ship,
// each built with its module's experiments, so that they share their
// build cache with make images.
var (
	scannerCommand  = gobuild.InModule(gobuild.Scanner, "cmd/trivy-scanner")
	operatorWorkers = gobuild.New("cmd/collector", "cmd/remover")
	// bin has each worker's path by name.
	bin = map[string]string{}
)

func TestMain(m *testing.M) {
	for name, c := range map[string]*gobuild.Commands{"trivy-scanner": scannerCommand, "collector": operatorWorkers, "remover": operatorWorkers} {
		dir, err := c.Build()
		if err != nil {
			fmt.Fprintln(os.Stderr, "building workers:", err)
			os.Exit(1)
		}
		bin[name] = filepath.Join(dir, name)
	}
	code := m.Run()
	scannerCommand.Remove()
	operatorWorkers.Remove()
	os.Exit(code)
}

const (
	vulnerable = "example.com/vulnerable:1"
	clean      = "example.com/clean:1"
	eol        = "example.com/eol:1"
	static     = "example.com/static:1"
	running    = "example.com/vulnerable-running:1"
	excluded   = "example.com/keep/vulnerable:1"
)

// now is the pinned clock: Alpine 3.19 (the EOL image) reached its end of
// life on 2025-11-01; 3.22 (the others) is supported until 2027-04-30.
const now = "2026-06-01T00:00:00Z"

var advisories = []fixture.Advisory{
	{Release: "3.22", Package: "musl", ID: "CVE-2099-0001", Fixed: "1.2.5-r0", Severity: dbtypes.SeverityCritical},
}

// seed starts a containerd with one image per verdict and a container
// running a vulnerable image.
func seed(t *testing.T) *node { return seedOn(t, onContainerd(t)) }

// seedOn puts one image per verdict on the node's runtime and runs a
// container of a vulnerable image.
func seedOn(t *testing.T, n *node) *node {
	t.Helper()
	pause := testimage.Pause(t)
	musl := func(v string) fixture.Package { return fixture.Package{Name: "musl", Version: v} }
	alpine := func(tag, release string, extra map[string][]byte, pkgs ...fixture.Package) testimage.Image {
		files := fixture.AlpineFiles(release, pkgs...)
		for k, v := range extra {
			files[k] = v
		}
		// The tag in a file gives each image its own ID.
		files["etc/fixture-tag"] = []byte(tag)
		return testimage.Image{Tags: []string{tag}, Files: files, Entrypoint: []string{"/pause"}}
	}
	n.rt.Import(t,
		alpine(vulnerable, "3.22.1", nil, musl("1.2.4-r2")),
		alpine(clean, "3.22.1", nil, musl("1.2.5-r0")),
		alpine(eol, "3.19.1", nil, fixture.Package{Name: "busybox", Version: "1.36.1-r0"}),
		testimage.Image{Tags: []string{static}, RandomBytes: 2048},
		alpine(running, "3.22.1", map[string][]byte{"pause": pause}, musl("1.2.4-r2")),
		alpine(excluded, "3.22.1", nil, musl("1.2.4-r2")),
	)
	n.rt.RunContainer(t, "running", running)
	return n
}

func present(t *testing.T, n *node) []string {
	t.Helper()
	var out []string
	for tag := range n.rt.ImageIDs(t) {
		// CRI-O lists repo digests beside the tags: the tags name them.
		if strings.HasPrefix(tag, "example.com/") && !strings.Contains(tag, "@") {
			out = append(out, tag)
		}
	}
	slices.Sort(out)
	return out
}

// eraserConfig writes the EraserConfig the pod mounts, with the scanner's
// configuration inside it as upstream nests it.
func eraserConfig(t *testing.T, scannerConfig string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\ncomponents:\n  collector: {enabled: true}\n  scanner:\n    enabled: true\n    config: |\n")
	for _, line := range strings.Split(scannerConfig, "\n") {
		b.WriteString("      " + line + "\n")
	}
	p := filepath.Join(t.TempDir(), "controller_manager_config.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func seededDB(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := fixture.WriteDB(dir, advisories); err != nil {
		t.Fatal(err)
	}
	return dir
}

type run = workertest.Run

func runWorker(t *testing.T, ctx context.Context, name string, args ...string) run {
	t.Helper()
	return workertest.Worker(t, ctx, bin[name], args...)
}

// pod runs the three workers as one scheduled worker pod does, with the
// runtime's flags the pod spec gives them.
func pod(t *testing.T, n *node, configFile, exclusions string) (collector, scanner, remover run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shared := workertest.SharedDir(t)
	common := append([]string{"--runtime-endpoint=" + n.endpoint, "--shared-dir=" + shared, "--exclusion-dir=" + exclusions}, n.args...)
	var wg sync.WaitGroup
	wg.Go(func() { collector = runWorker(t, ctx, "collector", common...) })
	wg.Go(func() {
		scanner = runWorker(t, ctx, "trivy-scanner", append([]string{"--config=" + configFile, "--now=" + now}, common...)...)
	})
	remover = runWorker(t, ctx, "remover", append([]string{"--scanner=enabled"}, common...)...)
	wg.Wait()
	return collector, scanner, remover
}

func TestPipelineRemovesWhatThePolicySays(t *testing.T) {
	cases := map[string]struct {
		deleteEOL bool
		want      []string
		verdicts  map[string]string
	}{
		"end-of-life images removed (default)": {
			deleteEOL: true,
			want:      []string{clean, excluded, running, static},
			verdicts:  map[string]string{vulnerable: "vulnerable", clean: "clean", eol: "end-of-life", static: "unsupported"},
		},
		"end-of-life images kept": {
			want:     []string{clean, eol, excluded, running, static},
			verdicts: map[string]string{vulnerable: "vulnerable", clean: "clean", eol: "end-of-life", static: "unsupported"},
		},
	}
	// The same images and DB on either runtime give the same verdicts: the
	// scanner reads containerd's content store and CRI-O's image store.
	for name, tc := range cases {
		for rt, start := range runtimes {
			t.Run(rt+"/"+name, func(t *testing.T) {
				c := seedOn(t, start(t))
				cfg := eraserConfig(t, fmt.Sprintf("cacheDir: %s\nskipDBUpdate: true\ndeleteEOLImages: %t", seededDB(t), tc.deleteEOL))
				collector, scanner, remover := pod(t, c, cfg, workertest.ExclusionDir(t, "example.com/keep/*"))
				if collector.Code != 0 || scanner.Code != 0 || remover.Code != 0 {
					t.Fatalf("exit codes collector %d scanner %d remover %d\nscanner:\n%s\nremover:\n%s", collector.Code, scanner.Code, remover.Code, scanner.Stderr, remover.Stderr)
				}
				slices.Sort(tc.want)
				if diff := cmp.Diff(tc.want, present(t, c)); diff != "" {
					t.Errorf("images left on the node (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.verdicts, verdicts(scanner.Summary)); diff != "" {
					t.Errorf("scanner verdicts (-want +got):\n%s", diff)
				}
				wantSent := 1
				if tc.deleteEOL {
					wantSent = 2
				}
				if n := scanner.Summary.Counts[workerresult.CountToRemove]; n != wantSent {
					t.Errorf("scanner handed %d images to the remover, want %d", n, wantSent)
				}
				reportEntries(t, scanner, tc.verdicts)
			})
		}
	}
}

// reportEntries: the scanner's log, read as the manager's report reads it,
// has one entry per image judged with its verdict, and the vulnerable one
// says which finding decided it (ID, severity, package, fixed version); its
// summary names the DB.
func reportEntries(t *testing.T, scanner run, want map[string]string) {
	t.Helper()
	entries, _, err := nodereport.ParseLog(strings.NewReader(scanner.Stderr), 1000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		if e.Scan == nil {
			t.Errorf("entry %+v has no verdict", e)
			continue
		}
		got[e.Image] = e.Scan.Verdict
		if e.Scan.Verdict != "vulnerable" {
			continue
		}
		f := workerresult.Finding{ID: "CVE-2099-0001", Severity: "CRITICAL", Package: "musl", FixedVersion: "1.2.5-r0"}
		if len(e.Scan.Findings) != 1 || e.Scan.Findings[0] != f || !e.Scan.Remove || !strings.Contains(e.Detail, "CVE-2099-0001 CRITICAL musl (fixed in 1.2.5-r0)") {
			t.Errorf("vulnerable entry %+v (%+v): want the finding %+v", e, e.Scan, f)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report entries' verdicts (-want +got):\n%s", diff)
	}
	if db := scanner.Summary.ScanDB; db == nil || db.Version != 2 || db.UpdatedAt == nil {
		t.Errorf("summary's DB %+v: want the schema version and build time", db)
	}
}

// TestDBDownloadedFromDBRepo: the online path, kept offline: the DB is
// served as Trivy's OCI artifact by a registry on loopback, and dbRepo
// names it without a tag, as upstream's default does.
func TestDBDownloadedFromDBRepo(t *testing.T) {
	testcontainerd.Require(t)
	repo := serveDB(t)
	c := seed(t)
	cache := t.TempDir()
	cfg := eraserConfig(t, fmt.Sprintf("cacheDir: %s\ndbRepo: %s", cache, repo))
	collector, scanner, remover := pod(t, c, cfg, t.TempDir())
	if collector.Code != 0 || scanner.Code != 0 || remover.Code != 0 {
		t.Fatalf("exit codes collector %d scanner %d remover %d\nscanner:\n%s", collector.Code, scanner.Code, remover.Code, scanner.Stderr)
	}
	if !strings.Contains(scanner.Stderr, `"downloaded":true`) {
		t.Errorf("the scanner did not download the DB:\n%s", scanner.Stderr)
	}
	if _, err := os.Stat(filepath.Join(cache, "db", "trivy.db")); err != nil {
		t.Errorf("no DB in the cache: %v", err)
	}
	if slices.Contains(present(t, c), vulnerable) {
		t.Error("the vulnerable image is still on the node")
	}
}

// TestMultiPlatformImage: an image pulled as a multi-platform index has
// only the node's platform in the content store; the scanner judges that
// one (here the vulnerable one, while the arm64 variant is fixed).
func TestMultiPlatformImage(t *testing.T) {
	testcontainerd.Require(t)
	const multi = "example.com/multi:1"
	variant := func(musl, arch string) v1.Image {
		files := fixture.AlpineFiles("3.22.1", fixture.Package{Name: "musl", Version: musl})
		files["etc/arch"] = []byte(arch)
		img, err := testimage.Image{Files: files}.Build()
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		cf.Architecture = arch
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		return img
	}
	other := variant("1.2.5-r0", "s390x")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: variant("1.2.4-r2", runtime.GOARCH), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}}},
	)
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name": multi, "org.opencontainers.image.ref.name": "1",
	})); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "multi.tar")
	if out, err := exec.Command("tar", "-C", dir, "-cf", archive, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	n := onContainerd(t)
	c := n.ctrd
	// Without --all-platforms: the image is unpacked for the node's platform.
	c.Ctr(t, "images", "import", archive)
	// As a pull from a registry records it: an image with no repository
	// digest is kept as not re-pullable, whatever the scanner says.
	c.AddRepoDigest(t, multi)
	if !slices.Contains(present(t, n), multi) {
		t.Fatalf("the index was not imported: %v", present(t, n))
	}
	otherDigest, err := other.Digest()
	if err != nil {
		t.Fatal(err)
	}
	// The import writes every blob of the archive and leaves the other
	// platform's to containerd's garbage collector, which runs when it
	// will: remove its manifest now, so the store is what a node that
	// pulled only its own platform has.
	_ = exec.Command("ctr", "--address", c.Socket, "--namespace", "k8s.io", "content", "rm", otherDigest.String()).Run()
	if content := c.Ctr(t, "content", "ls", "-q"); strings.Contains(content, otherDigest.String()) {
		t.Fatalf("the other platform's manifest %s is still in the content store", otherDigest)
	}
	cfg := eraserConfig(t, fmt.Sprintf("cacheDir: %s\nskipDBUpdate: true", seededDB(t)))
	collector, scanner, remover := pod(t, n, cfg, t.TempDir())
	if collector.Code != 0 || scanner.Code != 0 || remover.Code != 0 {
		t.Fatalf("exit codes collector %d scanner %d remover %d\nscanner:\n%s", collector.Code, scanner.Code, remover.Code, scanner.Stderr)
	}
	if diff := cmp.Diff(map[string]string{multi: "vulnerable"}, verdicts(scanner.Summary)); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s\n%s", diff, scanner.Stderr)
	}
	if slices.Contains(present(t, n), multi) {
		t.Error("the vulnerable image is still on the node")
	}
}

func verdicts(s workerresult.Summary) map[string]string {
	got := map[string]string{}
	for _, v := range s.Verdicts {
		got[v.Image] = v.Verdict
	}
	return got
}

// TestNoDBRemovesNothing: without a usable DB the scanner fails loudly, and
// the collector and remover still finish, having removed nothing.
func TestNoDBRemovesNothing(t *testing.T) {
	testcontainerd.Require(t)
	cases := map[string]struct {
		config string
		want   string
	}{
		"air-gapped without a seeded DB": {config: "cacheDir: %s\nskipDBUpdate: true", want: "skipDBUpdate is on"},
		// Nothing listens on port 1: the download fails at once.
		"download fails": {config: "cacheDir: %s\ndbRepo: 127.0.0.1:1/trivy-db", want: "downloading the vulnerability DB"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := seed(t)
			before := present(t, c)
			cfg := eraserConfig(t, fmt.Sprintf(tc.config, t.TempDir()))
			collector, scanner, remover := pod(t, c, cfg, t.TempDir())
			if collector.Code != 0 || remover.Code != 0 {
				t.Errorf("collector exit %d, remover exit %d: they must finish normally", collector.Code, remover.Code)
			}
			if scanner.Code != 1 || !strings.Contains(scanner.Summary.Error, tc.want) {
				t.Errorf("scanner exit %d, error %q; want 1 and %q\n%s", scanner.Code, scanner.Summary.Error, tc.want, scanner.Stderr)
			}
			if diff := cmp.Diff(before, present(t, c)); diff != "" {
				t.Errorf("images changed (-before +after):\n%s", diff)
			}
		})
	}
}
