package podspec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestHandoffTimeoutFollowsScan: the collector and the remover of a
// scheduled run wait for their peers as long as the configured scan may
// take, not the hour they were once capped at.
func TestHandoffTimeoutFollowsScan(t *testing.T) {
	const trivy = "components: {collector: {enabled: true}, scanner: {enabled: true, config: 'timeout: {total: %s}'}}"
	cases := map[string]string{
		"upstream's 23h total":       strings.Replace(trivy, "%s", "23h", 1),
		"a 47h total":                strings.Replace(trivy, "%s", "47h", 1),
		"a 2h total":                 strings.Replace(trivy, "%s", "2h", 1),
		"no total: the pod's bound":  strings.Replace(trivy, "%s", "0s", 1),
		"no scanner":                 "components: {collector: {enabled: true}, scanner: {enabled: false}}",
		"a custom scanner, 30h pods": "manager: {imageJob: {podRunTimeout: 30h}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true, image: {repo: example.com/mine}}}",
	}
	want := map[string]string{
		"upstream's 23h total":       "23h40m0s",
		"a 47h total":                "47h40m0s",
		"a 2h total":                 "2h40m0s",
		"no total: the pod's bound":  "24h0m0s",
		"no scanner":                 "1h0m0s",
		"a custom scanner, 30h pods": "30h0m0s",
	}
	got := map[string]string{}
	for name, doc := range cases {
		pod, err := Build(Params{References: testRefs, Job: "s", Kind: KindCollector, Node: "n1", OS: podpaths.Linux, ConfigMap: "s", ConfigKey: "c.yaml", LogLevel: "info", Config: cfg(t, doc)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pod.Spec.Containers {
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--handoff-timeout="); ok {
					if prev, seen := got[name]; seen && prev != v {
						t.Errorf("%s: the workers wait differently: %s and %s", name, prev, v)
					}
					got[name] = v
				}
			}
			if c.Name == ScannerContainer && strings.Contains(strings.Join(c.Args, " "), "--handoff-timeout") {
				t.Errorf("%s: the scanner got --handoff-timeout, which a custom scanner would refuse", name)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("--handoff-timeout (-want +got):\n%s", diff)
	}
}
