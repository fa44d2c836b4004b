package strictkeys

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sigsyaml "sigs.k8s.io/yaml"
)

func TestYAML(t *testing.T) {
	cases := map[string]struct {
		data, want string
	}{
		"upstream's scanner config":        {data: "cacheDir: /var/lib/trivy\ndbRepo: ghcr.io/aquasecurity/trivy-db\nvulnerabilities:\n  ignoreUnfixed: true\n  severities: [CRITICAL]\ntimeout:\n  total: 23h\n"},
		"repeated key":                     {data: "timeout:\n  total: 23h\n  total: 1h\n", want: `line 3: key "total" appears again (first on line 2); only the last would be read`},
		"re-cased key":                     {data: "deleteFailedImages: false\nDeleteFailedImages: true\n", want: `line 2: key "DeleteFailedImages" differs only in case from "deleteFailedImages" on line 1; only the last would be read`},
		"long s":                           {data: "components:\n  a: 1\ncomponentſ:\n  a: 2\n", want: `line 3: key "componentſ" differs only in case from "components" on line 1; only the last would be read`},
		"long s escaped":                   {data: "components: {}\n\"component\\u017f\": {}\n", want: `line 2: key "componentſ" differs only in case from "components" on line 1; only the last would be read`},
		"Kelvin sign":                      {data: "k: 1\n\u212a: 2\n", want: "line 2: key \"\u212a\" differs only in case from \"k\" on line 1; only the last would be read"},
		"dotted capital I is not i":        {data: "i: 1\nİ: 2\n"},
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

// FuzzYAML reads any document without failing, and checks two keys a and
// b against the way configuration is decoded (sigs.k8s.io/yaml, then
// encoding/json): YAML refuses them in one mapping exactly when
// encoding/json would decode both into one struct field.
func FuzzYAML(f *testing.F) {
	for _, s := range []string{"a: 1\na: 2\n", "x:\n  y: [ {z: 1, Z: 2} ]\n", "{", "- a\n- b\n"} {
		f.Add(s, "a", "A")
	}
	for _, pair := range [][2]string{{"components", "componentſ"}, {"k", "\u212a"}, {"i", "İ"}, {"σ", "ς"}, {"ǆ", "ǅ"}, {"cacheDir", "CACHEDIR"}, {"a,b", "A"}} {
		f.Add(`{}`, pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, doc, a, b string) {
		_ = YAML([]byte(doc))

		qa, qb := yamlQuote(a), yamlQuote(b)
		ja, ok := jsonKey(qa)
		if !ok {
			return
		}
		jb, ok := jsonKey(qb)
		if !ok {
			return
		}
		same, ok := decodesInto(t, ja, jb)
		if !ok {
			return
		}
		both := "x:\n- {" + qa + ": 1, " + qb + ": 2}\n"
		if refused := YAML([]byte(both)) != nil; refused != same {
			t.Errorf("encoding/json decodes %q into field %q: %v; YAML(%q) refused: %v", jb, ja, same, both, refused)
		}
	})
}

// yamlQuote writes s as a YAML double-quoted scalar, escaping all but
// printable ASCII so that any string can be a key.
func yamlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r >= 0x20 && r < 0x7f && r != '"' && r != '\\':
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsonKey returns the key encoding/json receives for the YAML key q, once
// sigs.k8s.io/yaml has turned the document into JSON.
func jsonKey(q string) (string, bool) {
	raw, err := sigsyaml.YAMLToJSON([]byte("{" + q + ": 1}"))
	if err != nil {
		return "", false
	}
	var m map[string]int
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return "", false
	}
	for k := range m {
		return k, true
	}
	return "", false
}
