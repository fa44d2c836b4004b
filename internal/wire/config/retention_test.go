package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// retentionDocs writes the same manager.retention section in each version:
// it is our addition to all three.
func retentionDocs(section string) map[string]string {
	return map[string]string{
		VersionV1alpha1: "apiVersion: eraser.sh/v1alpha1\nmanager: {runtime: containerd, retention: " + section + "}",
		VersionV1alpha2: "apiVersion: eraser.sh/v1alpha2\nmanager: {runtime: containerd, retention: " + section + "}",
		VersionV1alpha3: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd}, retention: " + section + "}",
	}
}

func TestRetention(t *testing.T) {
	cases := map[string]struct {
		section string
		want    Retention
	}{
		"defaults": {
			section: "{}",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, ImageFsPath: "/var/lib/containerd"},
		},
		"null keeps the defaults": {
			section: "null",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, ImageFsPath: "/var/lib/containerd"},
		},
		"every key": {
			section: "{minAge: 1h, unusedFor: 720h, highThresholdPercent: 85, lowThresholdPercent: 80, imageFsPath: /mnt/images}",
			want:    Retention{MinAge: time.Hour, CoolDown: workerdefaults.CoolDown, UnusedFor: 720 * time.Hour, HighThresholdPercent: 85, LowThresholdPercent: 80, ImageFsPath: "/mnt/images"},
		},
		"unusedFor alone": {
			section: "{unusedFor: 168h}",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, UnusedFor: 168 * time.Hour, ImageFsPath: "/var/lib/containerd"},
		},
		"thresholds at the bounds": {
			section: "{highThresholdPercent: 100, lowThresholdPercent: 1}",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, HighThresholdPercent: 100, LowThresholdPercent: 1, ImageFsPath: "/var/lib/containerd"},
		},
		"thresholds as strings": {
			section: "{highThresholdPercent: '90', lowThresholdPercent: '70'}",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, HighThresholdPercent: 90, LowThresholdPercent: 70, ImageFsPath: "/var/lib/containerd"},
		},
		"protections off": {
			section: "{protectReferenced: false, removeVulnerableReferenced: false, protectNotRepullable: false}",
			want: Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, ImageFsPath: "/var/lib/containerd",
				IgnoreReferenced: true, KeepVulnerableReferenced: true, RemoveNotRepullable: true},
		},
		"vulnerable referenced kept": {
			section: "{removeVulnerableReferenced: false}",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, ImageFsPath: "/var/lib/containerd", KeepVulnerableReferenced: true},
		},
		"keepVersions and coolDown": {
			section: "{keepVersions: 3, coolDown: 6h}",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: 6 * time.Hour, KeepVersions: 3, ImageFsPath: "/var/lib/containerd"},
		},
		"coolDown off, keepVersions as a string": {
			section: "{keepVersions: '0', coolDown: 0s}",
			want:    Retention{MinAge: workerdefaults.MinAge, ImageFsPath: "/var/lib/containerd"},
		},
		"imageFsPath cleaned": {
			section: "{highThresholdPercent: 90, lowThresholdPercent: 70, imageFsPath: /data/containerd/}",
			want:    Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, HighThresholdPercent: 90, LowThresholdPercent: 70, ImageFsPath: "/data/containerd"},
		},
	}
	for name, tc := range cases {
		for version, doc := range retentionDocs(tc.section) {
			t.Run(name+"/"+version, func(t *testing.T) {
				cfg, _, err := Parse([]byte(doc))
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if diff := cmp.Diff(tc.want, cfg.Manager.Retention); diff != "" {
					t.Errorf("retention (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestRetentionImageFsPathByRuntime: the default is where the configured
// runtime keeps its images.
func TestRetentionImageFsPathByRuntime(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want string
	}{
		"containerd v1alpha3": {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd}}", want: "/var/lib/containerd"},
		"crio v1alpha3":       {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: crio}}", want: "/var/lib/containers/storage"},
		"dockershim v1alpha3": {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: dockershim}}", want: "/var/lib/docker"},
		"crio v1alpha2":       {doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {runtime: crio}", want: "/var/lib/containers/storage"},
		"dockershim v1alpha1": {doc: "apiVersion: eraser.sh/v1alpha1\nmanager: {runtime: dockershim}", want: "/var/lib/docker"},
		"set path wins":       {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: crio}, retention: {highThresholdPercent: 2, lowThresholdPercent: 1, imageFsPath: /srv/images}}", want: "/srv/images"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := cfg.Manager.Retention.ImageFsPath; got != tc.want {
				t.Errorf("imageFsPath %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRetentionErrors: each rule of docs/retention.md, in each version,
// refuses the document with the field path.
func TestRetentionErrors(t *testing.T) {
	cases := map[string]struct {
		section string
		// paths are the field paths of the errors, in order.
		paths []string
		// want are substrings of the error.
		want []string
	}{
		"negative keepVersions": {
			section: "{keepVersions: -1}",
			paths:   []string{"manager.retention.keepVersions"},
			want:    []string{"must be a whole number between 0 (off) and 1000"},
		},
		"keepVersions not a number": {
			section: "{keepVersions: three}",
			paths:   []string{"manager.retention.keepVersions"},
			want:    []string{`"three"`},
		},
		"keepVersions too large": {
			section: "{keepVersions: 1001}",
			paths:   []string{"manager.retention.keepVersions"},
		},
		"negative coolDown": {
			section: "{coolDown: -1h}",
			paths:   []string{"manager.retention.coolDown"},
			want:    []string{"must not be negative"},
		},
		"coolDown not a duration": {
			section: "{coolDown: 1d}",
			paths:   []string{"manager.retention.coolDown"},
			want:    []string{"must be a duration"},
		},
		"zero minAge": {
			section: "{minAge: 0s}",
			paths:   []string{"manager.retention.minAge"},
			want:    []string{"must be greater than zero"},
		},
		"bare zero minAge": {
			section: "{minAge: 0}",
			paths:   []string{"manager.retention.minAge"},
			want:    []string{"must be greater than zero"},
		},
		"negative minAge": {
			section: "{minAge: -1m}",
			paths:   []string{"manager.retention.minAge"},
			want:    []string{"must not be negative"},
		},
		"minAge not a duration": {
			section: "{minAge: 1day}",
			paths:   []string{"manager.retention.minAge"},
			want:    []string{`"1day"`, `must be a duration such as "24h", "90m" or "0s"`},
		},
		"zero unusedFor": {
			section: "{unusedFor: 0s}",
			paths:   []string{"manager.retention.unusedFor"},
			want:    []string{"must be greater than zero"},
		},
		"unusedFor not a duration": {
			section: "{unusedFor: 30d}",
			paths:   []string{"manager.retention.unusedFor"},
			want:    []string{`"30d"`, "must be a duration"},
		},
		"high without low": {
			section: "{highThresholdPercent: 85}",
			paths:   []string{"manager.retention.lowThresholdPercent"},
			want:    []string{"Required value: set both thresholds or neither"},
		},
		"low without high": {
			section: "{lowThresholdPercent: 80}",
			paths:   []string{"manager.retention.highThresholdPercent"},
			want:    []string{"Required value: set both thresholds or neither"},
		},
		"zero threshold": {
			section: "{highThresholdPercent: 0, lowThresholdPercent: 0}",
			paths:   []string{"manager.retention.highThresholdPercent", "manager.retention.lowThresholdPercent"},
			want:    []string{"must be a whole percent between 1 and 100"},
		},
		"above 100": {
			section: "{highThresholdPercent: 101, lowThresholdPercent: 80}",
			paths:   []string{"manager.retention.highThresholdPercent"},
			want:    []string{`"101"`, "must be a whole percent between 1 and 100"},
		},
		"fraction": {
			section: "{highThresholdPercent: 85.5, lowThresholdPercent: 80}",
			paths:   []string{"manager.retention.highThresholdPercent"},
			want:    []string{`"85.5"`, "whole percent"},
		},
		"percent sign": {
			section: "{highThresholdPercent: 85%, lowThresholdPercent: 80}",
			paths:   []string{"manager.retention.highThresholdPercent"},
			want:    []string{"whole percent"},
		},
		"low equals high": {
			section: "{highThresholdPercent: 80, lowThresholdPercent: 80}",
			paths:   []string{"manager.retention.lowThresholdPercent"},
			want:    []string{"must be below highThresholdPercent (80)"},
		},
		"low above high": {
			section: "{highThresholdPercent: 70, lowThresholdPercent: 90}",
			paths:   []string{"manager.retention.lowThresholdPercent"},
			want:    []string{"must be below highThresholdPercent (70)"},
		},
		"relative imageFsPath": {
			section: "{highThresholdPercent: 85, lowThresholdPercent: 80, imageFsPath: var/lib/containerd}",
			paths:   []string{"manager.retention.imageFsPath"},
			want:    []string{"must be an absolute path"},
		},
		"root imageFsPath": {
			section: "{highThresholdPercent: 85, lowThresholdPercent: 80, imageFsPath: /}",
			paths:   []string{"manager.retention.imageFsPath"},
		},
		"unknown key": {
			section: "{minAge: 1h, unusedfor: 720h}",
			paths:   []string{"manager.retention.unusedfor"},
			want:    []string{`unknown key, did you mean "unusedFor"?`},
		},
		"unknown key listed": {
			section: "{keepLatest: 3}",
			paths:   []string{"manager.retention.keepLatest"},
			want:    []string{"coolDown, highThresholdPercent, imageFsPath, keepVersions, lowThresholdPercent, minAge, protectNotRepullable, protectReferenced, registryCheck, removeVulnerableReferenced, unusedFor"},
		},
		"not a mapping": {
			section: "720h",
			paths:   []string{"manager.retention"},
			want:    []string{"must be a mapping"},
		},
		"every problem at once": {
			section: "{minAge: 0s, unusedFor: -1h, highThresholdPercent: 50, lowThresholdPercent: 60, imageFsPath: x}",
			paths: []string{"manager.retention.minAge", "manager.retention.unusedFor", "manager.retention.lowThresholdPercent",
				"manager.retention.imageFsPath"},
		},
	}
	for name, tc := range cases {
		for version, doc := range retentionDocs(tc.section) {
			t.Run(name+"/"+version, func(t *testing.T) {
				cfg, _, err := Parse([]byte(doc))
				if err == nil {
					t.Fatalf("accepted: %+v", cfg.Manager.Retention)
				}
				if diff := cmp.Diff(tc.paths, errorPaths(t, err)); diff != "" {
					t.Errorf("error paths (-want +got):\n%s\nerror: %v", diff, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\ndoes not mention %q", err, w)
					}
				}
			})
		}
	}
}

func TestRetentionWarnings(t *testing.T) {
	cases := map[string]struct {
		section string
		want    []string
	}{
		"thresholds and path": {section: "{highThresholdPercent: 85, lowThresholdPercent: 80, imageFsPath: /mnt/images}"},
		"path alone": {
			section: "{imageFsPath: /mnt/images}",
			want:    []string{"manager.retention.imageFsPath: has no effect unless highThresholdPercent and lowThresholdPercent are set"},
		},
	}
	for name, tc := range cases {
		for version, doc := range retentionDocs(tc.section) {
			t.Run(name+"/"+version, func(t *testing.T) {
				_, got, err := Parse([]byte(doc))
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("warnings (-want +got):\n%s", diff)
				}
			})
		}
	}
}
