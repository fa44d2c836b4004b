//go:build linux

package reclaim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUnknownRecordKeys: a key of any record that the build's types do
// not have is named once; records this build knows whole, and an empty
// file, name none.
func TestUnknownRecordKeys(t *testing.T) {
	known := map[string]bool{"id": true, "parent": true, "created": true}
	cases := map[string]struct {
		data    string
		want    []string
		wantErr bool
	}{
		"empty file":             {data: "", want: nil},
		"no records":             {data: "[]", want: []string{}},
		"known keys only":        {data: `[{"id":"a","created":"2026-01-01T00:00:00Z"},{"id":"b","parent":"a"}]`, want: []string{}},
		"a newer library's keys": {data: `[{"id":"a","x-new":1},{"id":"b","x-new":2,"y":true}]`, want: []string{"x-new", "y"}},
		"not records":            {data: `{"id":"a"}`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := unknownRecordKeys([]byte(tc.data), known)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewerRecords: the files with unknown keys are named with them; a
// missing file is none.
func TestNewerRecords(t *testing.T) {
	dir := t.TempDir()
	layers := filepath.Join(dir, "layers.json")
	if err := os.WriteFile(layers, []byte(`[{"id":"a","x-new":1}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(dir, "images.json")
	if err := os.WriteFile(images, []byte(`[{"id":"i"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"id": true}
	why, err := newerRecords([]recordsFile{{layers, known}, {images, known}, {filepath.Join(dir, "missing.json"), known}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(why, `layers.json has fields this build's containers/storage does not know ("x-new")`) || strings.Contains(why, "images.json") {
		t.Errorf("got %q", why)
	}
	why, err = newerRecords([]recordsFile{{images, known}})
	if err != nil || why != "" {
		t.Errorf("records known whole: %q, %v", why, err)
	}
}
