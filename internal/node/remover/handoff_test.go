package remover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// TestHandoffTargets: what a scanner (or the collector) hands on must be
// images the collector listed, by ID or digest; anything else rejects the
// whole hand-off, so nothing is removed.
func TestHandoffTargets(t *testing.T) {
	collected := []handoff.Image{
		{ImageID: id('a'), Names: []string{"docker.io/library/alpine:3.19"}},
		{ImageID: id('c'), Digests: []string{id('d')}},
	}
	cases := map[string]struct {
		received []handoff.Image
		want     []string
		wantErr  string
	}{
		"empty":               {received: []handoff.Image{}},
		"by id":               {received: []handoff.Image{{ImageID: id('a')}}, want: []string{id('a')}},
		"bare hex id":         {received: []handoff.Image{{ImageID: strings.Repeat("a", 64)}}, want: []string{id('a')}},
		"by digest":           {received: []handoff.Image{{ImageID: id('d')}}, want: []string{id('d')}},
		"star":                {received: []handoff.Image{{ImageID: id('a')}, {ImageID: "*"}}, wantErr: `[1]: "*" is not an image ID or digest`},
		"bare tag":            {received: []handoff.Image{{ImageID: "alpine"}}, wantErr: `[0]: "alpine" is not an image ID or digest`},
		"full tag":            {received: []handoff.Image{{ImageID: "docker.io/library/alpine:3.19"}}, wantErr: "is not an image ID or digest"},
		"not collected":       {received: []handoff.Image{{ImageID: id('b')}}, wantErr: "[0]: " + id('b') + " is not among the 2 images the collector listed"},
		"names widen nothing": {received: []handoff.Image{{ImageID: id('a'), Names: []string{"*"}}}, want: []string{id('a')}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := HandoffTargets(tc.received, collected)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.All || len(got.Refs) > 0 {
				t.Fatal("a hand-off selected every image, or listed images as an ImageList does")
			}
			if diff := cmp.Diff([]string{id('a'), id('c')}, got.Collected); !got.Scheduled || diff != "" {
				t.Errorf("scheduled=%v, collected (-want +got):\n%s", got.Scheduled, diff)
			}
			var refs []string
			for _, r := range got.Handed {
				if r.Kind != imageref.KindDigest {
					t.Errorf("target %v is not a digest", r)
				}
				refs = append(refs, r.String())
			}
			if diff := cmp.Diff(tc.want, refs); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCollectedRecord: the collector's record is written whole or not at
// all, and a remover without it refuses the hand-off.
func TestCollectedRecord(t *testing.T) {
	// Not t.TempDir: this package runs under Wine too, which cannot remove
	// a directory that held a renamed file; the clean-up is best effort.
	dir, err := os.MkdirTemp("", "collected")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if _, err := handoff.ReadCollected(dir); err == nil || !strings.Contains(err.Error(), "the collector's record") {
		t.Fatalf("missing record: err = %v", err)
	}
	images := []handoff.Image{{ImageID: id('a'), Names: []string{}, Digests: []string{}}}
	if err := handoff.WriteCollected(dir, images); err != nil {
		t.Fatal(err)
	}
	got, err := handoff.ReadCollected(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(images, got); diff != "" {
		t.Errorf("(-written +read):\n%s", diff)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != handoff.Collected {
		t.Errorf("left in the shared dir: %v", entries)
	}
	if err := os.WriteFile(filepath.Join(dir, handoff.Collected), []byte(`[{"image_id":"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := handoff.ReadCollected(dir); err == nil {
		t.Error("a truncated record was accepted")
	}
}
