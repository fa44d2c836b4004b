package exclusion

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/exclusionlist"
)

// writeTree lays out files under a temporary directory; "a/b" keys make dirs.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadDir(t *testing.T) {
	cases := map[string]struct {
		files     map[string]string
		want      []string
		wantNotes []string
		wantErr   string
	}{
		"no lists": {files: map[string]string{"other/x.json": `{"excluded":["a"]}`}},
		"one list": {files: map[string]string{"exclude-cm/list.json": `{"excluded":["docker.io/library/*","alpine:3.19"]}`},
			want: []string{"docker.io/library/*", "alpine:3.19"}},
		"every file of every list": {files: map[string]string{
			"exclude-a/1.json":   `{"excluded":["a:*"]}`,
			"exclude-a/2.json":   `{"excluded":["b:*"]}`,
			"exclude-b/x.json":   `{"excluded":["quay.io/*"]}`,
			"exclude-b/notes.md": `{"excluded":["c:*"]}`,
		}, want: []string{"a:*", "b:*", "c:*", "quay.io/*"}},
		"every key, whatever its name": {files: map[string]string{"exclude-cm/images": `{"excluded":["a:*"]}`, "exclude-cm/z.yaml": `{"excluded":["b:*"]}`},
			want: []string{"a:*", "b:*"}},
		"a key that is not a list, beside upstream's": {files: map[string]string{"exclude-cm/notes.md": `not a list`, "exclude-cm/l.json": `{"excluded":["a:*"]}`},
			want: []string{"a:*"}, wantNotes: []string{`exclude-cm/notes.md`}},
		"upstream's key not a list":  {files: map[string]string{"exclude-cm/notes.json": `not a list`}, wantErr: `exclude-cm: exclusion list notes.json: want {"excluded"`},
		"second document":            {files: map[string]string{"exclude-cm/l.json": `{"excluded":["a"]}{"excluded":["b"]}`}, wantErr: "after the first JSON document"},
		"second document on a line":  {files: map[string]string{"exclude-cm/l.json": "{\"excluded\":[\"a\"]}\n{\"excluded\":[\"b\"]}\n"}, wantErr: "after the first JSON document"},
		"trailing garbage":           {files: map[string]string{"exclude-cm/l.json": `{"excluded":["a"]} ,`}, wantErr: "after the first JSON document"},
		"second document, other key": {files: map[string]string{"exclude-cm/a.json": `{"excluded":["a"]}`, "exclude-cm/b.json": `{"excluded":["b"]}{}`}, want: []string{"a"}, wantNotes: []string{"exclude-cm/b.json"}},
		"trailing whitespace":        {files: map[string]string{"exclude-cm/l.json": "{\"excluded\":[\"a\"]}\n\t \n"}, want: []string{"a"}},
		"empty key":                  {files: map[string]string{"exclude-cm/l.json": ``}, wantErr: `want {"excluded"`},
		"a directory inside a list":  {files: map[string]string{"exclude-cm/sub/l.json": `{"excluded":["a"]}`}, wantErr: "exclude-cm/sub: not a file"},
		"a file named like a list":   {files: map[string]string{"exclude-cm": `{"excluded":["a"]}`}, wantErr: "exclude-cm: not a directory"},
		"configmap volume internals skipped": {files: map[string]string{
			"exclude-cm/..2026_11_30/list.json": `{"excluded":["x"]}`,
			"exclude-cm/..data.json":            `garbage`,
			"exclude-cm/list.json":              `{"excluded":["y:*"]}`,
		}, want: []string{"y:*"}},
		"empty list":    {files: map[string]string{"exclude-cm/l.json": `{"excluded":[]}`}},
		"null":          {files: map[string]string{"exclude-cm/l.json": `null`}, wantNotes: []string{"exclude-cm/l.json"}},
		"not json":      {files: map[string]string{"exclude-cm/l.json": `excluded: [a]`}, wantErr: `want {"excluded"`},
		"unknown key":   {files: map[string]string{"exclude-cm/l.json": `{"exclude":["a"]}`}, wantNotes: []string{`exclude-cm/l.json "exclude"`}},
		"legacy glob":   {files: map[string]string{"exclude-cm/l.json": `{"excluded":["ok:*","al*ne"]}`}, want: []string{"ok:*", "al*ne"}, wantNotes: []string{`exclude-cm/l.json "al*ne"`}},
		"empty pattern": {files: map[string]string{"exclude-cm/l.json": `{"excluded":[""]}`}, want: []string{""}, wantNotes: []string{`exclude-cm/l.json ""`}},
		"not a string":  {files: map[string]string{"exclude-cm/l.json": `{"excluded":["a", 1]}`}, wantErr: `"excluded"`},
		// Go's decoder keeps the last of two equal keys and matches keys in
		// any case; here every list given is read.
		"repeated key": {files: map[string]string{"exclude-cm/l.json": `{"excluded":["a:1"],"excluded":["b:1"]}`},
			want: []string{"a:1", "b:1"}, wantNotes: []string{`exclude-cm/l.json "excluded"`}},
		"re-cased key after": {files: map[string]string{"exclude-cm/l.json": `{"excluded":["a:1"],"Excluded":[]}`},
			want: []string{"a:1"}, wantNotes: []string{`exclude-cm/l.json "Excluded"`, `exclude-cm/l.json "Excluded"`}},
		"re-cased key alone": {files: map[string]string{"exclude-cm/l.json": `{"Excluded":["a:1"]}`}, want: []string{"a:1"}, wantNotes: []string{`exclude-cm/l.json "Excluded"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pats, notes, err := ReadDir(writeTree(t, tc.files))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got, gotNotes []string
			for _, p := range pats {
				got = append(got, p.String())
			}
			for _, n := range notes {
				s := n.Key
				if n.Entry != "" || n.Reading != exclusionlist.ReadingNull && !strings.HasPrefix(n.Reading, exclusionlist.ReadingIgnoredKey) {
					s += fmt.Sprintf(" %q", n.Entry)
				}
				gotNotes = append(gotNotes, s)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patterns (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNotes, gotNotes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadDirMissing(t *testing.T) {
	pats, _, err := ReadDir(filepath.Join(t.TempDir(), "nope"))
	if err != nil || pats != nil {
		t.Errorf("missing directory: %v, %v; want no exclusions", pats, err)
	}
}

// TestReadDirConfigMapVolume: the layout the kubelet makes for a ConfigMap
// volume (keys are symlinks through ..data into a timestamped directory):
// each key is read once; a key whose target cannot be read fails.
func TestReadDirConfigMapVolume(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"exclude-cm/..2026_11_30_10_00_00.123/list.json": `{"excluded":["a:*"]}`,
		"exclude-cm/..2026_11_30_10_00_00.123/more":      `{"excluded":["b:*"]}`,
	})
	cm := filepath.Join(dir, "exclude-cm")
	for _, l := range [][2]string{{"..2026_11_30_10_00_00.123", "..data"}, {"..data/list.json", "list.json"}, {"..data/more", "more"}} {
		if err := os.Symlink(l[0], filepath.Join(cm, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	pats, _, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pats {
		got = append(got, p.String())
	}
	if diff := cmp.Diff([]string{"a:*", "b:*"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := os.Symlink("..data/gone", filepath.Join(cm, "gone")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadDir(dir); err == nil || !strings.Contains(err.Error(), "exclude-cm/gone") {
		t.Errorf("a key that cannot be read: err = %v, want it named", err)
	}
}
