package podspec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
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
