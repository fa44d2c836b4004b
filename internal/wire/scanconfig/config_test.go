package scanconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
	cases := map[string]struct {
		doc      string
		want     func(*Config)
		warnings []string
		wantErr  string
	}{
		"empty: defaults, failed kept": {doc: "", want: func(*Config) {}},
		"upstream v1.4.1 blob": {
			doc: "cacheDir: /var/lib/trivy\ndbRepo: ghcr.io/aquasecurity/trivy-db\ndeleteFailedImages: true\ndeleteEOLImages: true\n" +
				"vulnerabilities:\n  ignoreUnfixed: false\n  types: [os, library]\n  securityChecks: [vuln]\n  severities: [CRITICAL, HIGH, MEDIUM, LOW]\n  ignoredStatuses:\n" +
				"timeout:\n  total: 23h\n  perImage: 1h\n",
			want: func(c *Config) { c.DeleteFailedImages = true },
		},
		"critical only, air-gapped": {
			doc: "dbRepo: registry.local/trivy-db\nvulnerabilities: {ignoreUnfixed: true, severities: [CRITICAL]}\ntimeout: {perImage: 10m}",
			want: func(c *Config) {
				c.DBRepo = "registry.local/trivy-db"
				c.Vulnerabilities.IgnoreUnfixed = true
				c.Vulnerabilities.Severities = []string{"CRITICAL"}
				c.Timeout.PerImage = duration{10 * time.Minute}
			},
		},
		"air-gapped, pre-seeded DB": {
			doc:  "cacheDir: /var/lib/trivy-seed\ndbRepo: \"\"\nskipDBUpdate: true",
			want: func(c *Config) { c.CacheDir, c.DBRepo, c.SkipDBUpdate = "/var/lib/trivy-seed", "", true },
		},
		"no DB source":      {doc: "dbRepo: \"\"", wantErr: "nowhere to get"},
		"empty cacheDir":    {doc: "cacheDir: \"\"", wantErr: "cacheDir"},
		"unknown vuln type": {doc: "vulnerabilities: {types: [os, secrets]}", wantErr: "secrets"},
		"bad duration":      {doc: "timeout: {total: soon}", wantErr: "not a duration"},
		// Upstream's scanner dropped keys it did not know, and so does
		// this one, with a warning; refusing them would fail every node.
		"unknown key": {
			doc:      "deleteFailedImage: true",
			want:     func(*Config) {},
			warnings: []string{`deleteFailedImage: unknown key, ignored as by upstream Eraser; did you mean "deleteFailedImages"?`},
		},
		"unknown key in a section": {
			doc:      "vulnerabilities: {severites: [CRITICAL]}\ntimeout: {perimage: 5m, overall: 1h}",
			want:     func(c *Config) { c.Timeout.PerImage = duration{5 * time.Minute} },
			warnings: []string{`timeout.overall: unknown key, ignored as by upstream Eraser`, `vulnerabilities.severites: unknown key, ignored as by upstream Eraser; did you mean "severities"?`},
		},
		"upstream's runtime key": {
			doc:      "runtime: {name: containerd, address: unix:///run/containerd/containerd.sock}\ndeleteFailedImages: true",
			want:     func(c *Config) { c.DeleteFailedImages = true },
			warnings: []string{"runtime: ignored, as by upstream Eraser's scanner, which replaced it with manager.runtime; the scanner reads the runtime the worker pod mounts"},
		},
		"top-level securityChecks": {
			doc:  "securityChecks: [vuln, secret]\nseverities: [CRITICAL]\nperImage: 1m",
			want: func(*Config) {},
			warnings: []string{
				"perImage: ignored, as by upstream Eraser: it belongs under timeout (timeout.perImage)",
				"securityChecks: ignored, as by upstream Eraser: it belongs under vulnerabilities (vulnerabilities.securityChecks)",
				"severities: ignored, as by upstream Eraser: it belongs under vulnerabilities (vulnerabilities.severities)",
			},
		},
		// encoding/json, which upstream decoded with, ignores case.
		"key in another case": {
			doc:  "DeleteFailedImages: true\nVulnerabilities: {IgnoreUnfixed: true}",
			want: func(c *Config) { c.DeleteFailedImages, c.Vulnerabilities.IgnoreUnfixed = true, true },
		},
		"upstream docs' example": {
			doc: "cacheDir: /var/lib/trivy\ndbRepo: ghcr.io/aquasecurity/trivy-db\ndeleteFailedImages: true\ndeleteEOLImages: true\n" +
				"vulnerabilities:\n  ignoreUnfixed: true\n  types: [os, library]\n  securityChecks: [vuln]\n  severities: [CRITICAL]\n" +
				"timeout:\n  total: 23h\n  perImage: 1h\n",
			want: func(c *Config) {
				c.DeleteFailedImages, c.Vulnerabilities.IgnoreUnfixed = true, true
				c.Vulnerabilities.Severities = []string{"CRITICAL"}
			},
		},
		"comments only": {doc: "# the scanner's defaults\n", want: func(*Config) {}},
		// Keys of this project's own have no upstream documents: a near
		// miss is a typo from these docs.
		"own key misspelt":       {doc: "skipDBUpdates: true", wantErr: `skipDBUpdates: unknown key, did you mean "skipDBUpdate"?`},
		"own key misspelt again": {doc: "dbDownloadTimout: 5m", wantErr: `did you mean "dbDownloadTimeout"?`},
		"not a mapping":          {doc: "- cacheDir", wantErr: "must be a YAML mapping"},
		"wrong type":             {doc: "deleteFailedImages: sometimes", wantErr: "deleteFailedImages"},
		"DB download timeout": {
			doc:  "dbDownloadTimeout: 30m",
			want: func(c *Config) { c.DBDownloadTimeout = duration{30 * time.Minute} },
		},
		"zero DB download timeout":     {doc: "dbDownloadTimeout: 0s", wantErr: "dbDownloadTimeout: must be greater than zero"},
		"negative DB download timeout": {doc: "dbDownloadTimeout: -1m", wantErr: `"-1m" is not a duration`},
		"DB download timeout no unit":  {doc: "dbDownloadTimeout: 600", wantErr: `"600" is not a duration`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, warnings, err := Parse(tc.doc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultConfig()
			tc.want(&want)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(duration{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
	if d := DefaultConfig().DBDownloadTimeout.Duration; d != 10*time.Minute {
		t.Errorf("default DB download timeout %v, want 10m", d)
	}
}
