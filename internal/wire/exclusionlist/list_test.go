package exclusionlist

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

func TestRead(t *testing.T) {
	type result struct {
		Patterns []string
		Notes    []Note
		Err      bool
	}
	cases := map[string]struct {
		keys map[string]string
		want result
	}{
		"documented": {keys: map[string]string{"list.json": `{"excluded":["docker.io/library/*","alpine:3.19"]}`},
			want: result{Patterns: []string{"docker.io/library/*", "alpine:3.19"}}},
		"upstream's legacy forms": {keys: map[string]string{"list.json": `{"excluded":["nginx:1.*","*/pause:*"],"comment":"x"}`},
			want: result{Patterns: []string{"nginx:1.*", "*/pause:*"}, Notes: []Note{
				{Key: "list.json", Entry: "comment", Reading: ReadingUnknownField},
				{Key: "list.json", Entry: "nginx:1.*", Reading: imageref.LegacyGlob},
				{Key: "list.json", Entry: "*/pause:*", Reading: imageref.LegacyGlob},
			}}},
		"a repository on a registry with a port": {keys: map[string]string{"list.json": `{"excluded":["registry.example.com:5000/team/app:*","registry.example.com:5000/team/*"]}`},
			want: result{Patterns: []string{"registry.example.com:5000/team/app:*", "registry.example.com:5000/team/*"}, Notes: []Note{
				{Key: "list.json", Entry: "registry.example.com:5000/team/app:*", Reading: imageref.LegacyPortPrefix},
			}}},
		"re-cased": {keys: map[string]string{"list.json": `{"Excluded":["a:1"]}`},
			want: result{Patterns: []string{"a:1"}, Notes: []Note{{Key: "list.json", Entry: "Excluded", Reading: ReadingRecased}}}},
		"extra keys": {keys: map[string]string{"list.json": `{"excluded":["a:1"]}`, "README": "protects a", "more.json": "{"},
			want: result{Patterns: []string{"a:1"}, Notes: []Note{
				{Key: "README", Reading: ReadingIgnoredKey + `exclusion list README: want {"excluded": ["image", ...]}: invalid character 'p' looking for beginning of value`},
				{Key: "more.json", Reading: ReadingIgnoredKey + `exclusion list more.json: want {"excluded": ["image", ...]}: EOF`},
			}}},
		"extra key holding a list is read": {keys: map[string]string{"a.json": `{"excluded":["a:1"]}`, "b": `{"excluded":["b:1"]}`},
			want: result{Patterns: []string{"a:1", "b:1"}}},
		"upstream's key broken":     {keys: map[string]string{"a.json": `[]`, "b": `{"excluded":["b:1"]}`}, want: result{Err: true}},
		"no key upstream read":      {keys: map[string]string{"list": `oops`}, want: result{Notes: []Note{{Key: "list", Reading: ReadingIgnoredKey + `exclusion list list: want {"excluded": ["image", ...]}: invalid character 'o' looking for beginning of value`}}}},
		"a lone star":               {keys: map[string]string{"l.json": `{"excluded":["*"]}`}, want: result{Patterns: []string{"*"}, Notes: []Note{{Key: "l.json", Entry: "*", Reading: imageref.LegacyAll}}}},
		"excluded null":             {keys: map[string]string{"l.json": `{"excluded":null}`}},
		"no keys":                   {},
		"non-string entry upstream": {keys: map[string]string{"l.json": `{"excluded":[1]}`}, want: result{Err: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			keys := map[string][]byte{}
			for k, v := range tc.keys {
				keys[k] = []byte(v)
			}
			list, err := Read(keys)
			got := result{Notes: list.Notes, Err: err != nil}
			for _, p := range list.Patterns {
				got.Patterns = append(got.Patterns, p.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// upstreamDocument is how upstream's worker decoded the key it read.
type upstreamDocument struct {
	Excluded []string `json:"excluded"`
}

// FuzzRead: a ConfigMap with one key upstream read and one it did not.
// Read fails only where upstream's decoder failed on the key it read,
// never over the other key, and every entry upstream read is read here.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"excluded":["docker.io/library/*","alpine:3.19"]}`, `{"excluded":["*"]}`, `{"excluded":[]}`, `{}`,
		`{"excluded":["a"]}{"excluded":["b"]}`, `{"excluded":["a"]} x`, `{"excluded":["al*ne"]}`, ``, `null`, `[]`,
		"{\"excluded\":[\"a\"]}\n", `{"excluded":[""]}`, `{"exclude":["a"]}`, `{"Excluded":["a"],"excluded":["b"]}`,
		`{"excluded":["nginx:1.*"],"note":{"a":[1,2]}}`, `{"EXCLUDED":["a"]}`, `{"excluded":"a"}`,
	} {
		f.Add([]byte(s), []byte(`{"excluded":["b"]}`))
		f.Add([]byte(`{"excluded":["b"]}`), []byte(s))
	}
	f.Fuzz(func(t *testing.T, upstream, other []byte) {
		list, err := Read(map[string][]byte{"a.json": upstream, "b.json": other})
		var doc upstreamDocument
		upErr := json.Unmarshal(upstream, &doc)
		if (err != nil) != (upErr != nil) {
			t.Fatalf("upstream's key %q: err = %v, upstream's %v", upstream, err, upErr)
		}
		if err != nil {
			return
		}
		var got []string
		for _, p := range list.Patterns {
			got = append(got, p.String())
		}
		for _, s := range doc.Excluded {
			if !slices.Contains(got, s) {
				t.Fatalf("%q: upstream read %q, here %q", upstream, s, got)
			}
		}
	})
}
