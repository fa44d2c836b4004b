package podspec

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/references"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// TestRemoverToldOfScanner: every scheduled pod, Linux or Windows, tells its
// remover whether a scanner runs, from the config; manual pods, which hand
// the remover an ImageList, say nothing (the remover ignores it there).
func TestRemoverToldOfScanner(t *testing.T) {
	const on = "components: {collector: {enabled: true}, scanner: {enabled: true}}"
	const off = "components: {collector: {enabled: true}, scanner: {enabled: false}}"
	cases := map[string]struct {
		doc  string
		os   podpaths.OS
		kind Kind
	}{
		"linux, scanner on":    {doc: on, os: podpaths.Linux, kind: KindCollector},
		"linux, scanner off":   {doc: off, os: podpaths.Linux, kind: KindCollector},
		"windows, scanner on":  {doc: on, os: podpaths.Windows, kind: KindCollector},
		"windows, scanner off": {doc: off, os: podpaths.Windows, kind: KindCollector},
		"manual":               {doc: on, os: podpaths.Linux, kind: KindManual},
	}
	want := map[string][]string{
		"linux, scanner on":    {"--scanner=enabled"},
		"linux, scanner off":   {"--scanner=disabled"},
		"windows, scanner on":  {"--scanner=enabled"},
		"windows, scanner off": {"--scanner=disabled"},
		"manual":               nil,
	}
	got := map[string][]string{}
	for name, tc := range cases {
		pod, err := Build(Params{References: testRefs, Job: "j", Kind: tc.kind, Node: "n", OS: tc.os, ConfigMap: "j", LogLevel: "info", Config: cfg(t, tc.doc)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = nil
		for _, c := range pod.Spec.Containers {
			for _, a := range c.Args {
				if strings.HasPrefix(a, "--scanner") {
					if c.Name != RemoverContainer {
						t.Errorf("%s: %s got %s", name, c.Name, a)
						continue
					}
					got[name] = append(got[name], a)
				}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("remover's --scanner (-want +got):\n%s", diff)
	}
}

// TestScannerSharesThroughService: a Linux scanner of a manager with a scan
// service gets the service's address, its run's UID and a token of the
// run's audience, projected for it alone; without a service, or on Windows
// (which runs no Trivy scanner), nothing of it.
func TestScannerSharesThroughService(t *testing.T) {
	const on = "components: {collector: {enabled: true}, scanner: {enabled: true}}"
	type shared struct {
		Env      map[string]string
		Mounted  []string // containers mounting the token
		Audience string
		// Annotation is the service's address on the pod, AddressFrom
		// what the kubelet projects beside the token.
		Annotation, AddressFrom string
		// NodeRefs: the pod keeps its node's references annotation.
		NodeRefs bool
	}
	db := &scanshare.DB{Digest: "sha256:" + strings.Repeat("d", 64), Size: 73 << 20, Schema: 2, Built: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)}
	cases := map[string]struct {
		service string
		os      podpaths.OS
		db      *scanshare.DB
		want    shared
	}{
		"linux with a service": {service: "http://10.0.0.5:8890", os: podpaths.Linux, want: shared{
			Env: map[string]string{
				"ERASER_SCAN_SERVICE": "http://10.0.0.5:8890", "ERASER_JOB_UID": "uid-1", "ERASER_SCAN_TOKEN": "/run/eraser.sh/scan-token/token",
				"ERASER_SCAN_SERVICE_FILE": "/run/eraser.sh/scan-token/service",
			},
			Mounted: []string{ScannerContainer}, Audience: "scan.eraser.sh/uid-1",
			Annotation: "http://10.0.0.5:8890", AddressFrom: "metadata.annotations['eraser.sh/scan-service']", NodeRefs: true,
		}},
		"linux with a service and the run's DB": {service: "http://10.0.0.5:8890", os: podpaths.Linux, db: db, want: shared{
			Env: map[string]string{
				"ERASER_SCAN_SERVICE": "http://10.0.0.5:8890", "ERASER_JOB_UID": "uid-1", "ERASER_SCAN_TOKEN": "/run/eraser.sh/scan-token/token",
				"ERASER_SCAN_SERVICE_FILE": "/run/eraser.sh/scan-token/service",
				"ERASER_SCAN_DB":           db.Digest, "ERASER_SCAN_DB_SCHEMA": "2", "ERASER_SCAN_DB_BUILT": "2026-12-05T06:00:00Z",
				"ERASER_SCAN_DB_SIZE": "76546048",
			},
			Mounted: []string{ScannerContainer}, Audience: "scan.eraser.sh/uid-1",
			Annotation: "http://10.0.0.5:8890", AddressFrom: "metadata.annotations['eraser.sh/scan-service']", NodeRefs: true,
		}},
		"linux without a service": {os: podpaths.Linux, want: shared{Env: map[string]string{}, NodeRefs: true}},
		"windows with a service":  {service: "http://10.0.0.5:8890", os: podpaths.Windows, want: shared{Env: map[string]string{}, NodeRefs: true}},
	}
	for name, tc := range cases {
		pod, err := Build(Params{References: testRefs, Job: "j", JobUID: "uid-1", Kind: KindCollector, Node: "n", OS: tc.os, ConfigMap: "j",
			LogLevel: "info", Config: cfg(t, on), ScanService: tc.service, ScanDB: tc.db})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, refs := pod.Annotations[references.AnnotationNode]
		got := shared{Env: map[string]string{}, Annotation: pod.Annotations[scanshare.AnnotationService], NodeRefs: refs}
		for _, c := range pod.Spec.Containers {
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "ERASER_SCAN_") || e.Name == "ERASER_JOB_UID" {
					got.Env[e.Name] = e.Value
				}
			}
			for _, m := range c.VolumeMounts {
				if m.Name == podpaths.VolumeScanToken {
					got.Mounted = append(got.Mounted, c.Name)
				}
			}
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == podpaths.VolumeScanToken {
				got.Audience = v.Projected.Sources[0].ServiceAccountToken.Audience
				got.AddressFrom = v.Projected.Sources[1].DownwardAPI.Items[0].FieldRef.FieldPath
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
