//go:build unix

package criorecords_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

func TestLayerDiskBytes(t *testing.T) {
	outside := store(t, map[string]string{"big": strings.Repeat("x", 1<<20)})
	root := store(t, map[string]string{
		"overlay/rw/diff/etc/a":       strings.Repeat("a", 10),
		"overlay/rw/diff/var/lib/b":   strings.Repeat("b", 20),
		"overlay/rw/diff/empty":       "",
		"overlay/rw/link":             "l/ABCDEF", // the driver's own files beside diff are not the layer's
		"overlay/rw/work/x":           "not counted",
		"overlay/emptylayer/diff/.k":  "",
		"overlay/linkeddiff/diff/.ok": "",
		"vfs/dir/v/bin/sh":            strings.Repeat("s", 7),
	})
	diff := filepath.Join(root, "overlay", "rw", "diff")
	// A second name of b, counted once; links out of the layer, not followed.
	for _, err := range []error{
		os.Link(filepath.Join(diff, "var/lib/b"), filepath.Join(diff, "etc/b-again")),
		os.Symlink(filepath.Join(outside, "big"), filepath.Join(diff, "etc/big")),
		os.Symlink(outside, filepath.Join(diff, "outside")),
		os.MkdirAll(filepath.Join(diff, "a/deep/empty/dir"), 0o755),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A layer whose diff is itself a link out: not followed.
	if err := os.RemoveAll(filepath.Join(root, "overlay/linkeddiff/diff")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "overlay/linkeddiff/diff")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Bytes int64
		Err   string
	}
	got := map[string]result{}
	for name, tc := range map[string]struct{ driver, id string }{
		"files, a hard link once, no symlink followed": {"overlay", "rw"},
		"no files":                  {"overlay", "emptylayer"},
		"diff a symlink":            {"overlay", "linkeddiff"},
		"vfs":                       {"vfs", "v"},
		"missing":                   {"overlay", "gone"},
		"an ID that is a path":      {"overlay", "../overlay/rw"},
		"an ID of nothing":          {"overlay", ""},
		"a driver that is a path":   {"../overlay", "rw"},
		"a driver not measured":     {"btrfs", "rw"},
		"an ID that is the parent":  {"overlay", ".."},
		"an ID with a separator":    {"overlay", `rw\x`},
		"an ID with a NUL":          {"overlay", "rw\x00"},
		"overlay2 (the old alias)":  {"overlay2", "rw"},
		"an ID that is a directory": {"overlay", "."},
	} {
		n, err := criorecords.LayerDiskBytes(context.Background(), root, tc.driver, tc.id)
		r := result{Bytes: n}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.Err = "not exist"
		case err != nil:
			r.Err = "refused"
		}
		got[name] = r
	}
	want := map[string]result{
		"files, a hard link once, no symlink followed": {Bytes: 30},
		"no files":                  {},
		"diff a symlink":            {},
		"vfs":                       {Bytes: 7},
		"missing":                   {Err: "not exist"},
		"an ID that is a path":      {Err: "refused"},
		"an ID of nothing":          {Err: "refused"},
		"a driver that is a path":   {Err: "refused"},
		"a driver not measured":     {Err: "refused"},
		"an ID that is the parent":  {Err: "refused"},
		"an ID with a separator":    {Err: "refused"},
		"an ID with a NUL":          {Err: "refused"},
		"overlay2 (the old alias)":  {Err: "not exist"},
		"an ID that is a directory": {Err: "refused"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestLayerDiskBytesWhileWritten: files come and go under the walk, as in a
// running container's layer; the walk does not fail for it.
func TestLayerDiskBytesWhileWritten(t *testing.T) {
	root := t.TempDir()
	diff := filepath.Join(root, "overlay", "rw", "diff")
	if err := os.MkdirAll(diff, 0o755); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			dir := filepath.Join(diff, "d", strings.Repeat("x", i%5+1))
			_ = os.MkdirAll(dir, 0o755)
			_ = os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o644)
			_ = os.RemoveAll(filepath.Join(diff, "d"))
		}
	}()
	for range 200 {
		if _, err := criorecords.LayerDiskBytes(context.Background(), root, "overlay", "rw"); err != nil {
			t.Errorf("while files are written and removed: %v", err)
			break
		}
	}
	close(stop)
	<-done
}

// TestLayerDiskBytesBounded: a layer with more entries or more hard-linked
// files than the walk measures, or a walk past its context's end, ends
// with what it counted and an error saying why.
func TestLayerDiskBytesBounded(t *testing.T) {
	root := t.TempDir()
	diff := filepath.Join(root, "overlay", "rw", "diff")
	if err := os.MkdirAll(diff, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		f := filepath.Join(diff, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(f, []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(f, f+"-again"); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tc := range map[string]struct {
		ctx     context.Context
		limits  criorecords.WalkLimits
		wantErr error
		want    int64
	}{
		"within the limits":      {ctx: context.Background(), limits: criorecords.DefaultWalkLimits, want: 20},
		"too many entries":       {ctx: context.Background(), limits: criorecords.WalkLimits{Entries: 3, Linked: 100}, wantErr: criorecords.ErrWalkLimit, want: 5},
		"too many linked files":  {ctx: context.Background(), limits: criorecords.WalkLimits{Entries: 100, Linked: 2}, wantErr: criorecords.ErrWalkLimit, want: 10},
		"past the context's end": {ctx: cancelled, limits: criorecords.DefaultWalkLimits, wantErr: context.Canceled},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := criorecords.LayerDiskBytesWithin(tc.ctx, root, "overlay", "rw", tc.limits)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if n != tc.want {
				t.Errorf("%d bytes, want %d", n, tc.want)
			}
		})
	}
}
