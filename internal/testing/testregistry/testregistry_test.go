package testregistry_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/eraser-oss/eraser/internal/testing/testregistry"
)

// TestPushAndPull pushes an image under its own name and under a mirror's
// layout, and reads each back by its tag.
func TestPushAndPull(t *testing.T) {
	host := testregistry.Start(t)
	img, err := random.Image(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for label, ref := range map[string]string{"own name": "e2e/app:1", "mirror layout": "registry.k8s.io/pause:3.10"} {
		t.Run(label, func(t *testing.T) {
			if err := testregistry.Push(host, ref, img); err != nil {
				t.Fatal(err)
			}
			r, err := name.ParseReference(host+"/"+ref, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Head(r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.String(), desc.Digest.String()); diff != "" {
				t.Errorf("digest (-pushed +read):\n%s", diff)
			}
		})
	}
}

// TestDelete: a deleted image is served neither by its tag nor by its
// digest; another tag of the registry still is.
func TestDelete(t *testing.T) {
	host := testregistry.Start(t)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	dg, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := testregistry.Push(host, "e2e/app:1", img); err != nil {
		t.Fatal(err)
	}
	if err := testregistry.Push(host, "e2e/app:2", other); err != nil {
		t.Fatal(err)
	}
	if err := testregistry.Delete(host, "e2e/app:1"); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, ref := range []string{"e2e/app:1", "e2e/app@" + dg.String(), "e2e/app:2"} {
		r, err := name.ParseReference(host+"/"+ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Head(r)
		got[ref] = err == nil
	}
	want := map[string]bool{"e2e/app:1": false, "e2e/app@" + dg.String(): false, "e2e/app:2": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("served after the delete (-want +got):\n%s", diff)
	}
}
