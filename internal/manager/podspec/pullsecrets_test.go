package podspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestBuildPullSecrets: the manager's ERASER_PULL_SECRET_NAMES reach every
// worker pod after manager.pullSecrets, in every kind of pod, as upstream.
func TestBuildPullSecrets(t *testing.T) {
	scheduled := "components: {collector: {enabled: true}, scanner: {enabled: true}}\n"
	cases := map[string]struct {
		kind    Kind
		os      podpaths.OS
		doc     string
		fromEnv []string
		want    []string
	}{
		"none":              {kind: KindManual, os: podpaths.Linux},
		"configured only":   {kind: KindManual, os: podpaths.Linux, doc: "manager: {pullSecrets: [reg]}", want: []string{"reg"}},
		"environment only":  {kind: KindManual, os: podpaths.Linux, fromEnv: []string{"mirror", "backup"}, want: []string{"mirror", "backup"}},
		"configured first":  {kind: KindCollector, os: podpaths.Linux, doc: scheduled + "manager: {pullSecrets: [reg]}", fromEnv: []string{"mirror"}, want: []string{"reg", "mirror"}},
		"named twice, once": {kind: KindCollector, os: podpaths.Linux, doc: scheduled + "manager: {pullSecrets: [reg]}", fromEnv: []string{"reg", "mirror"}, want: []string{"reg", "mirror"}},
		"Windows pods too":  {kind: KindManual, os: podpaths.Windows, fromEnv: []string{"mirror"}, want: []string{"mirror"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, err := Build(Params{References: testRefs, Job: "j", Kind: tc.kind, Node: "n1", OS: tc.os, Namespace: "eraser-system", ConfigMap: "j", ConfigKey: "c.yaml",
				LogLevel: "info", Config: cfg(t, tc.doc), PullSecrets: tc.fromEnv})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, shapeOf(pod).Pull); diff != "" {
				t.Errorf("image pull secrets (-want +got):\n%s", diff)
			}
		})
	}
}
