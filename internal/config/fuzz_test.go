package config

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzParse: whatever the document, Parse never panics, and a document it
// accepts yields a configuration that honours every validated invariant.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, address: 'npipe://./pipe/x'}}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha1\nmanager: {runtime: 7}"))
	f.Add([]byte("apiVersion: eraser.sh/v1alpha2\ncomponents: {remover: {request: {cpu: -0}}}"))
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
