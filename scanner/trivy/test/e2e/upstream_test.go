//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

// TestUpstreamScannerKeys: scanner configurations written with upstream
// Eraser's keys only, in the EraserConfig versions that carried them, scan
// on a real containerd and remove what upstream's policy says. The keys
// upstream's scanner dropped (a runtime section, a top-level securityChecks,
// a key it never had) are warned about and change nothing. The DB comes
// from dbRepo, served on loopback, since skipDBUpdate is not upstream's.
func TestUpstreamScannerKeys(t *testing.T) {
	testcontainerd.Require(t)
	repo := serveDB(t)
	// Each document is shaped like the one its release shipped; dbRepo
	// points at the loopback registry.
	cases := map[string]struct {
		apiVersion, remover, blob string
		left                      []string
		warnings                  []string
	}{
		"v1.0.0 shape (v1alpha1)": {
			apiVersion: "eraser.sh/v1alpha1", remover: "eraser",
			blob: "cacheDir: %[1]s\ndbRepo: %[2]s\ndeleteFailedImages: true\nvulnerabilities:\n  ignoreUnfixed: true\n  types:\n    - os\n    - library\n" +
				"  securityChecks:\n    - vuln\n  severities:\n    - CRITICAL\ntimeout:\n  total: 23h\n  perImage: 1h",
			left: []string{clean, excluded, running, static},
		},
		"v1.2.3 shape (v1alpha2)": {
			apiVersion: "eraser.sh/v1alpha2", remover: "remover",
			blob: "cacheDir: %[1]s\ndbRepo: %[2]s\ndeleteFailedImages: true\ndeleteEOLImages: true\nvulnerabilities:\n  ignoreUnfixed: true\n" +
				"  types: [os, library]\n  securityChecks: [vuln]\n  severities: [CRITICAL, HIGH, MEDIUM, LOW]\ntimeout:\n  total: 23h\n  perImage: 1h",
			left: []string{clean, excluded, running, static},
		},
		"v1.4.1 shape with the keys upstream dropped (v1alpha3)": {
			apiVersion: "eraser.sh/v1alpha3", remover: "remover",
			blob: "runtime:\n  name: containerd\n  address: unix:///run/containerd/containerd.sock\nsecurityChecks: [vuln]\nreportFormat: json\n" +
				"cacheDir: %[1]s\ndbRepo: %[2]s\ndeleteFailedImages: true\ndeleteEOLImages: false\nvulnerabilities:\n  ignoreUnfixed: false\n" +
				"  types: [os, library]\n  securityChecks: [vuln]\n  severities: [CRITICAL, HIGH, MEDIUM, LOW]\n  ignoredStatuses:\ntimeout:\n  total: 23h\n  perImage: 1h",
			left: []string{clean, eol, excluded, running, static},
			warnings: []string{
				"components.scanner.config: runtime: ignored",
				"components.scanner.config: securityChecks: ignored, as by upstream Eraser: it belongs under vulnerabilities",
				"components.scanner.config: reportFormat: unknown key, ignored as by upstream Eraser",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := seed(t)
			cfg := upstreamDocument(t, tc.apiVersion, tc.remover, fmt.Sprintf(tc.blob, t.TempDir(), repo))
			collector, scanner, remover := pod(t, c, cfg, workertest.ExclusionDir(t, "example.com/keep/*"))
			if collector.Code != 0 || scanner.Code != 0 || remover.Code != 0 {
				t.Fatalf("exit codes collector %d scanner %d remover %d\nscanner:\n%s", collector.Code, scanner.Code, remover.Code, scanner.Stderr)
			}
			want := map[string]string{vulnerable: "vulnerable", clean: "clean", eol: "end-of-life", static: "unsupported"}
			if diff := cmp.Diff(want, verdicts(scanner.Summary)); diff != "" {
				t.Errorf("scanner verdicts (-want +got):\n%s", diff)
			}
			slices.Sort(tc.left)
			if diff := cmp.Diff(tc.left, present(t, c)); diff != "" {
				t.Errorf("images left on the node (-want +got):\n%s", diff)
			}
			for _, w := range tc.warnings {
				if !strings.Contains(scanner.Stderr, w) {
					t.Errorf("the scanner's log does not warn %q:\n%s", w, scanner.Stderr)
				}
			}
		})
	}
}

// upstreamDocument writes an EraserConfig shaped like upstream's shipped
// ones: Helm's ignored sections, the runtime as the version spells it, and
// the scanner's configuration nested in it.
func upstreamDocument(t *testing.T, apiVersion, remover, blob string) string {
	t.Helper()
	runtime := "runtime: containerd"
	if apiVersion == "eraser.sh/v1alpha3" {
		runtime = "runtime: {name: containerd, address: unix:///run/containerd/containerd.sock}"
	}
	var b strings.Builder
	b.WriteString("apiVersion: " + apiVersion + "\nkind: EraserConfig\nhealth: {}\nmetrics: {}\nmanager:\n  " + runtime +
		"\n  logLevel: info\n  nodeFilter: {type: exclude, selectors: [eraser.sh/cleanup.filter, kubernetes.io/os=windows]}\n" +
		"components:\n  collector: {enabled: true}\n  " + remover + ": {request: {mem: 25Mi, cpu: 0}, limit: {mem: 30Mi, cpu: 0}}\n" +
		"  scanner:\n    enabled: true\n    config: |\n")
	for _, line := range strings.Split(blob, "\n") {
		b.WriteString("      " + line + "\n")
	}
	p := filepath.Join(t.TempDir(), "controller_manager_config.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveDB serves the fixture DB as Trivy's OCI artifact from a registry on
// loopback and returns its repository, without a tag as upstream's dbRepo.
func serveDB(t *testing.T) string {
	t.Helper()
	reg, err := fixture.ServeDB(advisories)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg.Repo
}
