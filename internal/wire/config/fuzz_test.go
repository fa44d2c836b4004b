package config

import (
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// FuzzParse: whatever the document, Parse never panics, and a document it
// accepts yields a configuration that honours every validated invariant.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	upstream, _ := filepath.Glob(filepath.Join("testdata", "upstream", "v*.yaml"))
	for _, file := range append(files, upstream...) {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, address: 'npipe://./pipe/x'}}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha1\nmanager: {runtime: 7}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha2\ncomponents: {remover: {request: {cpu: -0}}}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha3\nmanager: {nodeFilter: {type: include, selector: [a]}}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha3\nhealth: null\nmanager: {extraScannerVolumes: [], imageJob: {tolerations: [{efect: NoSchedule}]}}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha3\nmanager: {retention: {minAge: 1h, unusedFor: 720h, highThresholdPercent: 85, lowThresholdPercent: 80, imageFsPath: /var/lib/containerd}}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha1\nmanager: {runtime: crio, retention: {highThresholdPercent: '100', lowThresholdPercent: 99}}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha2\nmanager: {retention: {keepVersions: 3, coolDown: 0}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		m := cfg.Manager
		if r := m.ImageJob.SuccessRatio; math.IsNaN(r) || r < 0 || r > 1 {
			t.Fatalf("accepted ratio %v", r)
		}
		if m.Scheduling.RepeatInterval <= 0 || m.ImageJob.Cleanup.DelayOnSuccess < 0 || m.ImageJob.Cleanup.DelayOnFailure < 0 {
			t.Fatalf("accepted durations %+v %+v", m.Scheduling, m.ImageJob.Cleanup)
		}
		if m.NodeFilter.Type != FilterExclude && m.NodeFilter.Type != FilterInclude {
			t.Fatalf("accepted filter type %q", m.NodeFilter.Type)
		}
		for _, tol := range m.ImageJob.Tolerations {
			if op := tol.Operator; op != "" && op != corev1.TolerationOpEqual && op != corev1.TolerationOpExists {
				t.Fatalf("accepted toleration %+v", tol)
			}
		}
		if _, ok := defaultRuntimeAddresses[m.Runtime.Name]; !ok || m.Runtime.Address == "" {
			t.Fatalf("accepted runtime %+v", m.Runtime)
		}
		if r := m.Retention; r.MinAge <= 0 || r.UnusedFor < 0 || (r.HighThresholdPercent == 0) != (r.LowThresholdPercent == 0) ||
			r.HighThresholdPercent > 100 || r.LowThresholdPercent < 0 || (r.HighThresholdPercent > 0 && r.LowThresholdPercent >= r.HighThresholdPercent) ||
			!path.IsAbs(r.ImageFsPath) || r.KeepVersions < 0 || r.KeepVersions > MaxKeepVersions || r.CoolDown < 0 {
			t.Fatalf("accepted retention %+v", r)
		}
		checkTypoRefused(t, data)
		if !cfg.Components.Remover.Enabled {
			t.Fatal("accepted a configuration with the remover off")
		}
		for _, c := range []Component{cfg.Components.Collector, cfg.Components.Scanner, cfg.Components.Remover} {
			if c.Image.Repo == "" || c.Limit.CPU != nil {
				t.Fatalf("accepted component %+v", c)
			}
			for _, res := range []Resources{c.Request, c.Limit} {
				if (res.Mem != nil && res.Mem.Sign() <= 0) || (res.CPU != nil && res.CPU.Sign() <= 0) {
					t.Fatalf("accepted resources %+v", res)
				}
			}
		}
	})
}

// FuzzParseImage: whatever --remover-image says, ParseImage never panics,
// and an image it accepts has a repository and stands for exactly the
// reference given, so the worker pods run the image that was named.
func FuzzParseImage(f *testing.F) {
	for _, ref := range []string{"ghcr.io/x/remover:v1", "remover", "localhost:5000/remover", "localhost:5000/remover:v2", "r/remover@sha256:abcd", ":v1", "repo:", "@sha256:abcd", "a b"} {
		f.Add(ref)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		img, err := ParseImage(ref)
		if err != nil {
			if img != (Image{}) {
				t.Fatalf("an image came with the error: %+v", img)
			}
			return
		}
		if img.Repo == "" || strings.HasPrefix(img.Repo, "@") || img.Ref() != ref {
			t.Fatalf("%q accepted as %+v, which is %q", ref, img, img.Ref())
		}
	})
}

// checkTypoRefused: an accepted document with one unknown key added where it
// matters most, the node filter, is refused, naming that key.
func checkTypoRefused(t *testing.T, data []byte) {
	t.Helper()
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return
	}
	manager, _ := top["manager"].(map[string]any)
	if manager == nil {
		manager = map[string]any{}
	}
	filter, _ := manager["nodeFilter"].(map[string]any)
	if filter == nil {
		filter = map[string]any{}
	}
	filter["selectr"] = []any{"pool=gpu"}
	manager["nodeFilter"], top["manager"] = filter, manager
	typo, err := yaml.Marshal(top)
	if err != nil || len(typo) > MaxDocumentSize {
		return
	}
	if _, _, err := Parse(typo); err == nil || !strings.Contains(err.Error(), "manager.nodeFilter.selectr") {
		t.Fatalf("a misspelt nodeFilter key was not refused (%v):\n%s", err, typo)
	}
}
