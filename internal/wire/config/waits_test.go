package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

// TestWaitsFor: a scanning run's waits follow the scanner's deadline (the
// DB download plus timeout.total) however long it is, where they were
// capped at an hour; the pod's run timeout is raised to fit it.
func TestWaitsFor(t *testing.T) {
	trivy := func(total, db time.Duration) *scanconfig.Config {
		sc := scanconfig.DefaultConfig()
		sc.Timeout.Total.Duration, sc.DBDownloadTimeout.Duration = total, db
		return &sc
	}
	def := scanconfig.DefaultConfig()
	cases := map[string]struct {
		podRun    time.Duration
		scheduled bool
		scanning  bool
		sc        *scanconfig.Config
		want      Waits
	}{
		"an ImageList's job": {podRun: 24 * time.Hour, sc: &def,
			want: Waits{Handoff: time.Hour, PodRun: 24 * time.Hour}},
		"scheduled, no scanner": {podRun: 24 * time.Hour, scheduled: true,
			want: Waits{Handoff: time.Hour, PodRun: 24 * time.Hour}},
		"defaults (23h total, 10m DB)": {podRun: 24 * time.Hour, scheduled: true, scanning: true, sc: &def,
			want: Waits{Handoff: 23*time.Hour + 40*time.Minute, PodRun: 24 * time.Hour, ScanDeadline: 23*time.Hour + 10*time.Minute}},
		"a short scan": {podRun: 24 * time.Hour, scheduled: true, scanning: true, sc: trivy(20*time.Minute, 10*time.Minute),
			want: Waits{Handoff: time.Hour, PodRun: 24 * time.Hour, ScanDeadline: 30 * time.Minute}},
		"30h total: the pods get it": {podRun: 24 * time.Hour, scheduled: true, scanning: true, sc: trivy(30*time.Hour, 10*time.Minute),
			want: Waits{Handoff: 30*time.Hour + 40*time.Minute, PodRun: 30*time.Hour + 40*time.Minute, ScanDeadline: 30*time.Hour + 10*time.Minute, Raised: true}},
		"a slow DB download counts": {podRun: 24 * time.Hour, scheduled: true, scanning: true, sc: trivy(23*time.Hour, time.Hour),
			want: Waits{Handoff: 24*time.Hour + 30*time.Minute, PodRun: 24*time.Hour + 30*time.Minute, ScanDeadline: 24 * time.Hour, Raised: true}},
		"podRunTimeout 2h with the default scan": {podRun: 2 * time.Hour, scheduled: true, scanning: true, sc: &def,
			want: Waits{Handoff: 23*time.Hour + 40*time.Minute, PodRun: 23*time.Hour + 40*time.Minute, ScanDeadline: 23*time.Hour + 10*time.Minute, Raised: true}},
		"no total: the pod's bound only": {podRun: 24 * time.Hour, scheduled: true, scanning: true, sc: trivy(0, 10*time.Minute),
			want: Waits{Handoff: 24 * time.Hour, PodRun: 24 * time.Hour}},
		"a custom scanner (deadline unknown)": {podRun: 48 * time.Hour, scheduled: true, scanning: true,
			want: Waits{Handoff: 48 * time.Hour, PodRun: 48 * time.Hour}},
	}
	got, want := map[string]Waits{}, map[string]Waits{}
	for name, tc := range cases {
		got[name], want[name] = WaitsFor(tc.podRun, tc.scheduled, tc.scanning, tc.sc), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// TestWaitsFromDocument: the waits come from the document as loaded, and a
// podRunTimeout the scan would outlive draws a warning naming the time the
// pods get instead.
func TestWaitsFromDocument(t *testing.T) {
	const head = "apiVersion: eraser.sh/v1alpha3\ncomponents: {collector: {enabled: true}, scanner: {enabled: true, config: 'timeout: {total: %s}'}}\n"
	cases := map[string]struct {
		doc         string
		wantHandoff time.Duration
		wantPodRun  time.Duration
		wantWarning string
	}{
		"shipped defaults": {doc: "apiVersion: eraser.sh/v1alpha3\ncomponents: {collector: {enabled: true}, scanner: {enabled: true}}",
			wantHandoff: 23*time.Hour + 40*time.Minute, wantPodRun: 24 * time.Hour},
		"upstream's 23h total": {doc: strings.Replace(head, "%s", "23h", 1),
			wantHandoff: 23*time.Hour + 40*time.Minute, wantPodRun: 24 * time.Hour},
		"a 47h total": {doc: strings.Replace(head, "%s", "47h", 1),
			wantHandoff: 47*time.Hour + 40*time.Minute, wantPodRun: 47*time.Hour + 40*time.Minute,
			wantWarning: "manager.imageJob.podRunTimeout: 24h0m0s is shorter than the scanner's deadline (dbDownloadTimeout plus timeout.total in components.scanner.config: 47h10m0s) plus 30m0s for listing and removal: scheduled runs' pods get 47h40m0s; lower timeout.total to end scheduled runs sooner"},
		"a custom scanner": {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {podRunTimeout: 30h}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true, image: {repo: example.com/my-scanner}, config: 'whatever: 1'}}",
			wantHandoff: 30 * time.Hour, wantPodRun: 30 * time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, warnings, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			w := cfg.Waits(true)
			if w.Handoff != tc.wantHandoff || w.PodRun != tc.wantPodRun {
				t.Errorf("handoff %v, pod run %v; want %v, %v", w.Handoff, w.PodRun, tc.wantHandoff, tc.wantPodRun)
			}
			var got string
			for _, warning := range warnings {
				if strings.HasPrefix(warning, "manager.imageJob.podRunTimeout") {
					got = warning
				}
			}
			if got != tc.wantWarning {
				t.Errorf("warning %q\nwant    %q", got, tc.wantWarning)
			}
			if ij := cfg.Waits(false); ij.PodRun != cfg.Manager.ImageJob.PodRunTimeout {
				t.Errorf("an ImageList's job gets %v, want podRunTimeout %v", ij.PodRun, cfg.Manager.ImageJob.PodRunTimeout)
			}
		})
	}
}
