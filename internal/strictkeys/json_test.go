package strictkeys

import (
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

func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"excluded":["a"]}`, `{"a":1,"a":2}`, `[{"x":{"y":[1,{"Y":2,"y":3}]}}]`, `{`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = JSON([]byte(s), "excluded")
	})
}
