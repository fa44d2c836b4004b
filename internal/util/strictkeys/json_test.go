package strictkeys

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJSON(t *testing.T) {
	cases := map[string]struct {
		data  string
		known []string
		want  string
	}{
		"upstream's exclusion list":        {data: `{"excluded": ["docker.io/library/*", "ghcr.io/eraser-oss/*"]}`, known: []string{"excluded"}},
		"repeated key":                     {data: `{"excluded":["a:1"],"excluded":["b:1"]}`, known: []string{"excluded"}, want: `$: key "excluded" appears twice; only the last would be read`},
		"case variant after":               {data: `{"excluded":["a:1"],"Excluded":[]}`, known: []string{"excluded"}, want: `$: keys "excluded" and "Excluded" differ only in case; only the last would be read`},
		"case variant alone":               {data: `{"EXCLUDED":["a:1"]}`, known: []string{"excluded"}, want: `$: key "EXCLUDED": the key is "excluded" (keys are case-sensitive here)`},
		"long s after":                     {data: `{"components":{},"componentſ":{}}`, want: `$: keys "components" and "componentſ" differ only in case; only the last would be read`},
		"long s escaped":                   {data: `{"components":{},"component\u017f":{}}`, want: `$: keys "components" and "componentſ" differ only in case; only the last would be read`},
		"Kelvin sign after":                {data: `{"k":1,"\u212a":2}`, want: "$: keys \"k\" and \"\u212a\" differ only in case; only the last would be read"},
		"long s alone":                     {data: `{"nameſ":[]}`, known: []string{"names"}, want: `$: key "nameſ": the key is "names" (keys are case-sensitive here)`},
		"dotted capital I is not i":        {data: `{"i":1,"İ":2}`},
		"unknown key is not ours":          {data: `{"excluded":[],"other":1}`, known: []string{"excluded"}},
		"nested objects":                   {data: `[{"image_id":"a","names":[]},{"image_id":"b","image_id":"c"}]`, known: []string{"image_id", "names"}, want: `$[1]: key "image_id" appears twice; only the last would be read`},
		"deeper":                           {data: `{"a":{"b":[{"c":1,"C":2}]}}`, want: `$.a.b[0]: keys "c" and "C" differ only in case; only the last would be read`},
		"same key in two objects":          {data: `[{"image_id":"a"},{"image_id":"b"}]`, known: []string{"image_id"}},
		"syntax error left to the decoder": {data: `{"excluded": [`, known: []string{"excluded"}},
		"cut short left to the decoder":    {data: `[{"image_id":"sha256:`, known: []string{"image_id"}},
		"empty":                            {data: ``},
		"scalars":                          {data: `"x"`},
		"too deep":                         {data: strings.Repeat("[", maxDepth+2), want: "$" + strings.Repeat("[0]", maxDepth+1) + ": nested deeper than 1000"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := JSON([]byte(tc.data), tc.known...); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzJSON reads any document without failing, and checks two keys a and
// b against encoding/json itself: JSON refuses them in one object, and b
// against the known key a, exactly when encoding/json would decode b into
// a struct field named a.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"excluded":["a"]}`, `{"a":1,"a":2}`, `[{"x":{"y":[1,{"Y":2,"y":3}]}}]`, `{`, `[]`} {
		f.Add(s, "excluded", "Excluded")
	}
	for _, pair := range [][2]string{{"components", "componentſ"}, {"k", "\u212a"}, {"i", "İ"}, {"σ", "ς"}, {"ǆ", "ǅ"}, {"image_id", "IMAGE_ID"}, {"a,b", "A"}} {
		f.Add(`{}`, pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, doc, a, b string) {
		_ = JSON([]byte(doc), "excluded")

		same, ok := decodesInto(t, a, b)
		if !ok {
			return
		}
		ka, kb := jsonString(t, a), jsonString(t, b)
		both := `[{"x":{` + ka + `:1,` + kb + `:2}}]`
		if refused := JSON([]byte(both)) != nil; refused != same {
			t.Errorf("encoding/json decodes %q into field %q: %v; JSON(%s) refused: %v", b, a, same, both, refused)
		}
		one := `{` + kb + `:1}`
		if refused := JSON([]byte(one), a) != nil; refused != (same && a != b) {
			t.Errorf("encoding/json decodes %q into field %q: %v; JSON(%s, %q) refused: %v", b, a, same, one, a, refused)
		}
	})
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
