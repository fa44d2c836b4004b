package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScannerRuntime: the Trivy scanner reads containerd and CRI-O, so a
// configuration that would have it scan on cri-dockerd every night is
// refused; anything that never runs it there is not.
func TestScannerRuntime(t *testing.T) {
	trivy := Image{Repo: "ghcr.io/eraser-dev/eraser-trivy-scanner", Tag: "v1.4.1"}
	custom := Image{Repo: "registry.example/crio-scanner", Tag: "v1"}
	refused := func(rt RuntimeName) string {
		return "components.scanner.enabled: Invalid value: true: the Trivy scanner reads images from containerd and CRI-O only, and manager.runtime is " + string(rt) +
			": every scheduled run would fail on every node. Set components.scanner.enabled: false (scheduled runs then remove every unused image that is not excluded)" +
			" or set components.scanner.image to a scanner that reads " + string(rt)
	}
	cases := map[string]struct {
		runtime            RuntimeName
		collector, scanner bool
		image              Image
		want               string
	}{
		"containerd scans":                  {runtime: RuntimeContainerd, collector: true, scanner: true, image: trivy},
		"crio scans":                        {runtime: RuntimeCrio, collector: true, scanner: true, image: trivy},
		"cri-dockerd refused":               {runtime: RuntimeDockershim, collector: true, scanner: true, image: trivy, want: refused(RuntimeDockershim)},
		"cri-dockerd without scanner":       {runtime: RuntimeDockershim, collector: true, image: trivy},
		"cri-dockerd, no scheduled runs":    {runtime: RuntimeDockershim, scanner: true, image: trivy},
		"cri-dockerd with a custom scanner": {runtime: RuntimeDockershim, collector: true, scanner: true, image: custom},
		"our scanner image":                 {runtime: RuntimeDockershim, collector: true, scanner: true, image: Image{Repo: "ghcr.io/eraser-oss/eraser-trivy-scanner"}, want: refused(RuntimeDockershim)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			comps := Components{
				Collector: Component{Enabled: tc.collector},
				Scanner:   Component{Enabled: tc.scanner, Image: tc.image},
			}
			got := ""
			if err := scannerRuntime(tc.runtime, comps); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestScannerRuntimeRefusedAtLoad: upstream's shipped configuration (collector
// and scanner on) with cri-dockerd is refused by Parse, naming the field, in every
// version.
func TestScannerRuntimeRefusedAtLoad(t *testing.T) {
	on := "components: {collector: {enabled: true}, scanner: {enabled: true}}"
	cases := map[string]string{
		"v1alpha1 dockershim": "apiVersion: eraser.sh/v1alpha1\nmanager: {runtime: dockershim}\n" + on,
		"v1alpha2 dockershim": "apiVersion: eraser.sh/v1alpha2\nmanager: {runtime: dockershim}\n" + on,
		"v1alpha3 dockershim": "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: dockershim, address: 'unix:///var/run/cri-dockerd.sock'}}\n" + on,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Parse([]byte(doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff([]string{"components.scanner.enabled"}, errorPaths(t, err)); diff != "" {
				t.Errorf("error paths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScannerConfigAtLoad: the manager reads the Trivy scanner's
// configuration as the scanner will, so that its warnings are seen where it
// is edited and a value the scanner would refuse on every node is refused
// once; a custom scanner's configuration is its own.
func TestScannerConfigAtLoad(t *testing.T) {
	doc := func(repo, blob string) string {
		return "apiVersion: eraser.sh/v1alpha3\ncomponents:\n  collector: {enabled: true}\n  scanner:\n    enabled: true\n    image: {repo: " + repo + "}\n    config: |\n      " +
			strings.ReplaceAll(blob, "\n", "\n      ") + "\n"
	}
	const p = "components.scanner.config: "
	cases := map[string]struct {
		doc      string
		warnings []string
		errPaths []string
		errText  string
	}{
		"upstream's keys": {
			doc: doc("ghcr.io/eraser-dev/eraser-trivy-scanner", "cacheDir: /var/lib/trivy\ndbRepo: ghcr.io/aquasecurity/trivy-db\ndeleteFailedImages: true\n"+
				"vulnerabilities: {ignoreUnfixed: false, types: [os, library], securityChecks: [vuln], severities: [CRITICAL], ignoredStatuses: []}\ntimeout: {total: 23h, perImage: 1h}"),
		},
		"upstream's ignored keys": {
			doc: doc("ghcr.io/eraser-dev/eraser-trivy-scanner", "runtime: {name: containerd}\nsecurityChecks: [vuln]"),
			warnings: []string{
				p + "runtime: ignored, as by upstream Eraser's scanner, which replaced it with manager.runtime; the scanner reads the runtime the worker pod mounts",
				p + "securityChecks: ignored, as by upstream Eraser: it belongs under vulnerabilities (vulnerabilities.securityChecks)",
			},
		},
		"unknown key": {
			doc:      doc("ghcr.io/eraser-oss/eraser-trivy-scanner", "deleteFailedImage: true"),
			warnings: []string{p + `deleteFailedImage: unknown key, ignored as by upstream Eraser; did you mean "deleteFailedImages"?`},
		},
		"own key misspelt": {
			doc:      doc("ghcr.io/eraser-oss/eraser-trivy-scanner", "skipDbUpdates: true"),
			errPaths: []string{"components.scanner.config"},
			errText:  `skipDbUpdates: unknown key, did you mean "skipDBUpdate"?`,
		},
		"invalid value": {
			doc:      doc("ghcr.io/eraser-oss/eraser-trivy-scanner", "timeout: {total: soon}"),
			errPaths: []string{"components.scanner.config"},
			errText:  `"soon" is not a duration`,
		},
		"custom scanner": {doc: doc("registry.example/my-scanner", "anything: [goes]\ntimeout: soon")},
		// Upstream never read the document while the scanner was off.
		"invalid while not scanning": {
			doc: strings.Replace(doc("ghcr.io/eraser-oss/eraser-trivy-scanner", "timeout: {total: 1d}"), "enabled: true", "enabled: false", 1),
			warnings: []string{
				"components.scanner.enabled: the scanner runs only in scheduled runs, which need components.collector.enabled: true",
				p + `not used while scheduled runs do not scan; the scanner would refuse it: "1d" is not a duration such as "1h"`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, warnings, err := Parse([]byte(tc.doc))
			if tc.errPaths == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
					t.Errorf("warnings (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff(tc.errPaths, errorPaths(t, err)); diff != "" {
				t.Errorf("error paths (-want +got):\n%s", diff)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("error %q does not say %q", err, tc.errText)
			}
		})
	}
}
