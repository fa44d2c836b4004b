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
