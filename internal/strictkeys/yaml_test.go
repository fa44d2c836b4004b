package strictkeys

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestYAML(t *testing.T) {
	cases := map[string]struct {
		data, want string
	}{
		"upstream's scanner config":        {data: "cacheDir: /var/lib/trivy\ndbRepo: ghcr.io/aquasecurity/trivy-db\nvulnerabilities:\n  ignoreUnfixed: true\n  severities: [CRITICAL]\ntimeout:\n  total: 23h\n"},
		"repeated key":                     {data: "timeout:\n  total: 23h\n  total: 1h\n", want: `line 3: key "total" appears again (first on line 2); only the last would be read`},
		"re-cased key":                     {data: "deleteFailedImages: false\nDeleteFailedImages: true\n", want: `line 2: key "DeleteFailedImages" differs only in case from "deleteFailedImages" on line 1; only the last would be read`},
		"nested in a list":                 {data: "selectors:\n- {a: 1, a: 2}\n", want: `line 2: key "a" appears again (first on line 2); only the last would be read`},
		"same key in two mappings":         {data: "a: {x: 1}\nb: {x: 2}\n"},
		"JSON is YAML":                     {data: `{"excluded":["a"],"excluded":[]}`, want: `line 1: key "excluded" appears again (first on line 1); only the last would be read`},
		"syntax error left to the decoder": {data: "a: [\n"},
		"empty":                            {data: ""},
		"two documents":                    {data: "a: 1\n---\na: 2\nb: 1\nb: 2\n", want: `line 5: key "b" appears again (first on line 4); only the last would be read`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := YAML([]byte(tc.data)); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("YAML (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzYAML(f *testing.F) {
	for _, s := range []string{"a: 1\na: 2\n", "x:\n  y: [ {z: 1, Z: 2} ]\n", "{", "- a\n- b\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = YAML([]byte(s))
	})
}
