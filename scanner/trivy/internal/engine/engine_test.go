package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	dbtypes "github.com/aquasecurity/trivy-db/pkg/types"
	"github.com/aquasecurity/trivy/pkg/clock"
	tlog "github.com/aquasecurity/trivy/pkg/log"
	xos "github.com/aquasecurity/trivy/pkg/x/os"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/ctrdimage"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/engine"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

var advisories = []fixture.Advisory{
	{Release: "3.22", Package: "musl", ID: "CVE-2099-0001", Fixed: "1.2.5-r0", Severity: dbtypes.SeverityCritical},
	{Release: "3.22", Package: "zlib", ID: "CVE-2099-0002", Fixed: "1.3.1-r0", Severity: dbtypes.SeverityLow},
	{Release: "3.19", Package: "musl", ID: "CVE-2099-0003", Fixed: "1.2.4-r3", Severity: dbtypes.SeverityHigh},
}

// eng is the one engine of this process: Trivy holds one DB per process.
var eng *engine.Engine

func TestMain(m *testing.M) {
	tlog.InitLogger(false, true)
	dir, err := os.MkdirTemp("", "trivy-engine-test")
	if err != nil {
		panic(err)
	}
	if err := fixture.WriteDB(dir, advisories); err != nil {
		panic(err)
	}
	eng, err = engine.New(filepath.Join(dir, "db"), nil, nil)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = eng.Close()
	_ = os.RemoveAll(dir)
	// Trivy's own temporary directory, one per process.
	_ = xos.Cleanup()
	os.Exit(code)
}

func TestScanImage(t *testing.T) {
	// The clock is pinned: whether 3.19 is end of life depends on it
	// (Alpine 3.19 reached end of life on 2025-11-01).
	before, after := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	vulnMusl := scan.Finding{ID: "CVE-2099-0001", Package: "musl", Severity: "CRITICAL", FixedVersion: "1.2.5-r0", Status: "fixed", Type: "os"}
	cases := map[string]struct {
		files   map[string][]byte
		windows bool
		now     time.Time
		want    scan.Report
	}{
		"vulnerable package": {
			files: fixture.AlpineFiles("3.22.1", fixture.Package{Name: "musl", Version: "1.2.4-r2"}, fixture.Package{Name: "busybox", Version: "1.36.1-r0"}),
			now:   after, want: scan.Report{Findings: []scan.Finding{vulnMusl}},
		},
		"two findings, two severities": {
			files: fixture.AlpineFiles("3.22.1", fixture.Package{Name: "musl", Version: "1.2.4-r2"}, fixture.Package{Name: "zlib", Version: "1.3.0-r0"}),
			now:   after,
			want: scan.Report{Findings: []scan.Finding{vulnMusl,
				{ID: "CVE-2099-0002", Package: "zlib", Severity: "LOW", FixedVersion: "1.3.1-r0", Status: "fixed", Type: "os"}}},
		},
		"fixed version installed": {
			files: fixture.AlpineFiles("3.22.1", fixture.Package{Name: "musl", Version: "1.2.5-r0"}),
			now:   after, want: scan.Report{},
		},
		"supported release before its end of life": {
			files: fixture.AlpineFiles("3.19.1", fixture.Package{Name: "busybox", Version: "1.36.1-r0"}),
			now:   before, want: scan.Report{},
		},
		"same release after its end of life": {
			files: fixture.AlpineFiles("3.19.1", fixture.Package{Name: "busybox", Version: "1.36.1-r0"}),
			now:   after, want: scan.Report{EndOfLife: true},
		},
		"no OS and no packages: cannot be judged": {
			files: map[string][]byte{"app": []byte("static binary")},
			now:   after, want: scan.Report{Unsupported: true},
		},
		"windows image": {
			files: map[string][]byte{"Files/app.exe": []byte("MZ")}, windows: true,
			now: after, want: scan.Report{Unsupported: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			img, err := testimage.Image{Files: tc.files}.Build()
			if err != nil {
				t.Fatal(err)
			}
			if tc.windows {
				cf, _ := img.ConfigFile()
				cf = cf.DeepCopy()
				cf.OS = "windows"
				if img, err = mutate.ConfigFile(img, cf); err != nil {
					t.Fatal(err)
				}
			}
			ctx := clock.With(context.Background(), tc.now)
			got, err := eng.ScanImage(ctx, ctrdimage.Wrap(img, handoff.Image{ImageID: "sha256:test", Names: []string{"example.com/" + name}}))
			if err != nil {
				t.Fatal(err)
			}
			// The report names the content it judged: the config's digest.
			content, _ := img.ConfigName()
			tc.want.Content = content.String()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestScanStopsWithItsContext(t *testing.T) {
	img, err := testimage.Image{Files: fixture.AlpineFiles("3.22.1", fixture.Package{Name: "musl", Version: "1.2.4-r2"})}.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := eng.ScanImage(ctx, ctrdimage.Wrap(img, handoff.Image{ImageID: "sha256:test"})); err == nil {
		t.Error("a scan with a cancelled context succeeded")
	}
}
