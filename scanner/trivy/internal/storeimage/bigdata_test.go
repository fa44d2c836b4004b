package storeimage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// TestBigDataFile: the file names containers/storage gives an image's
// documents: plain keys as they are, any other key base64-encoded.
func TestBigDataFile(t *testing.T) {
	cases := map[string]string{
		"manifest":           "manifest",
		"signature.1":        "signature.1",
		"sha256:abc":         "=c2hhMjU2OmFiYw==",
		"manifest-sha256:0f": "=bWFuaWZlc3Qtc2hhMjU2OjBm",
		"Upper":              "=VXBwZXI=",
	}
	for key, want := range cases {
		if got := bigDataFile(key); got != want {
			t.Errorf("bigDataFile(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestChain: an image's layers base first, from its top layer through the
// parents; a missing parent or a loop in damaged records is an error.
func TestChain(t *testing.T) {
	layers := map[string]criorecords.Layer{
		"base": {ID: "base"},
		"mid":  {ID: "mid", Parent: "base"},
		"top":  {ID: "top", Parent: "mid"},
		"lost": {ID: "lost", Parent: "gone"},
		"a":    {ID: "a", Parent: "b"},
		"b":    {ID: "b", Parent: "a"},
	}
	cases := map[string]struct {
		top     string
		want    []string
		wantErr string
	}{
		"three layers":   {top: "top", want: []string{"base", "mid", "top"}},
		"one layer":      {top: "base", want: []string{"base"}},
		"no layer":       {top: ""},
		"missing parent": {top: "lost", wantErr: "gone"},
		"a loop":         {top: "a", wantErr: "loop"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			chain, err := layerChain(layers, tc.top)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range chain {
				got = append(got, l.ID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestBigData: a document is read only under a key the record lists, and
// never outside the image's directory.
func TestBigData(t *testing.T) {
	root := t.TempDir()
	img := criorecords.Image{ID: "abc", TopLayer: "top", BigDataNames: []string{"sha256:abc", "manifest"}}
	dir := filepath.Join(root, "overlay-images", "abc")
	check(t, os.MkdirAll(dir, 0o755))
	check(t, os.WriteFile(filepath.Join(dir, bigDataFile("sha256:abc")), []byte(`{"os":"linux"}`), 0o644))
	if data, err := bigData(root, "overlay", img, "sha256:abc"); err != nil || string(data) != `{"os":"linux"}` {
		t.Errorf("the config: %q, %v", data, err)
	}
	if _, err := bigData(root, "overlay", img, "signature-1"); !errors.Is(err, errNoBigData) {
		t.Errorf("a key the record does not list: %v, want errNoBigData", err)
	}
	if _, err := bigData(root, "overlay", criorecords.Image{ID: "../abc", BigDataNames: []string{"manifest"}}, "manifest"); err == nil {
		t.Error("an ID with a path: no error")
	}
	// Sparse: the bound and a byte, no disk.
	check(t, os.WriteFile(filepath.Join(dir, "manifest"), nil, 0o644))
	check(t, os.Truncate(filepath.Join(dir, "manifest"), maxBigData+1))
	if _, err := bigData(root, "overlay", img, "manifest"); err == nil || !strings.Contains(err.Error(), "over 16 MiB") {
		t.Errorf("a document past the bound: %v, want refused", err)
	}
}
