package protect

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestCheck(t *testing.T) {
	id := "sha256:" + strings.Repeat("a", 64)
	img := cri.Image{ID: id, Tags: []string{"docker.io/library/alpine:3.19"}, Digests: []string{"docker.io/library/alpine@sha256:" + strings.Repeat("b", 64)}}
	excl := func(s string) []imageref.Pattern {
		p := imageref.ParsePattern(s)
		return []imageref.Pattern{p}
	}
	cases := map[string]struct {
		img        cri.Image
		containers []cri.Container
		policy     Policy
		want       Decision
	}{
		"unused":                 {img: img},
		"used by tag":            {img: img, containers: []cri.Container{{Name: "c", Image: "alpine:3.19"}}, want: Decision{workerresult.InUse, "container c"}},
		"used by image ref":      {img: img, containers: []cri.Container{{Name: "c", ImageRef: id}}, want: Decision{workerresult.InUse, "container c"}},
		"used by image id":       {img: img, containers: []cri.Container{{ID: "abc", ImageID: id}}, want: Decision{workerresult.InUse, "container abc"}},
		"used by repo digest":    {img: img, containers: []cri.Container{{Name: "c", ImageRef: "docker.io/library/alpine@sha256:" + strings.Repeat("b", 64)}}, want: Decision{workerresult.InUse, "container c"}},
		"docker-pullable:// ref": {img: img, containers: []cri.Container{{Name: "c", ImageRef: "docker-pullable://docker.io/library/alpine@sha256:" + strings.Repeat("b", 64)}}, want: Decision{workerresult.InUse, "container c"}},
		"docker:// image id":     {img: img, containers: []cri.Container{{Name: "c", ImageID: "docker://" + id}}, want: Decision{workerresult.InUse, "container c"}},
		"other container":        {img: img, containers: []cri.Container{{Name: "c", Image: "alpine:3.18", ImageRef: "sha256:" + strings.Repeat("c", 64)}}},
		"garbage container ref":  {img: img, containers: []cri.Container{{Name: "c", Image: "not a ref"}}},
		"pinned":                 {img: cri.Image{ID: id, Pinned: true}, want: Decision{workerresult.Pinned, "pinned by the runtime"}},
		"sandbox short name":     {img: cri.Image{ID: id, Tags: []string{"registry.k8s.io/pause:3.10"}}, policy: Policy{SandboxImage: "registry.k8s.io/pause:3.10"}, want: Decision{workerresult.Pinned, "the runtime's sandbox image"}},
		"sandbox normalised":     {img: cri.Image{ID: id, Tags: []string{"docker.io/library/pause:3"}}, policy: Policy{SandboxImage: "pause:3"}, want: Decision{workerresult.Pinned, "the runtime's sandbox image"}},
		"pod sandbox image":      {img: cri.Image{ID: id, Tags: []string{"registry.k8s.io/pause:3.9"}}, policy: Policy{SandboxImage: "registry.k8s.io/pause:3.10", SandboxImages: []string{"registry.k8s.io/pause:3.9"}}, want: Decision{workerresult.Pinned, "a pod sandbox's image"}},
		"pod sandbox by id":      {img: cri.Image{ID: id}, policy: Policy{SandboxImages: []string{id}}, want: Decision{workerresult.Pinned, "a pod sandbox's image"}},
		"no guess when known":    {img: cri.Image{ID: id, Tags: []string{"registry.k8s.io/pause:3.9"}}, policy: Policy{SandboxImage: "registry.k8s.io/pause:3.10"}},
		"guessed pause":          {img: cri.Image{ID: id, Tags: []string{"registry.k8s.io/pause:3.9"}}, policy: Policy{GuessPause: true}, want: Decision{workerresult.Pinned, guessDetail}},
		"guessed pause-amd64":    {img: cri.Image{ID: id, Tags: []string{"k8s.gcr.io/pause-amd64:3.1"}}, policy: Policy{GuessPause: true}, want: Decision{workerresult.Pinned, guessDetail}},
		"guessed bottlerocket":   {img: cri.Image{ID: id, Tags: []string{"localhost/kubernetes/pause:0.1.0"}}, policy: Policy{GuessPause: true}, want: Decision{workerresult.Pinned, guessDetail}},
		"guessed by digest":      {img: cri.Image{ID: id, Digests: []string{"mcr.microsoft.com/oss/kubernetes/pause@sha256:" + strings.Repeat("b", 64)}}, policy: Policy{GuessPause: true}, want: Decision{workerresult.Pinned, guessDetail}},
		"not a pause by path":    {img: cri.Image{ID: id, Tags: []string{"example.com/pause/app:1"}}, policy: Policy{GuessPause: true}},
		"not a pause":            {img: img, policy: Policy{GuessPause: true}},
		"excluded":               {img: img, policy: Policy{Exclusions: excl("alpine:*")}, want: Decision{workerresult.Excluded, "exclusion alpine:*"}},
		"in use beats excluded":  {img: img, containers: []cri.Container{{Name: "c", ImageRef: id}}, policy: Policy{Exclusions: excl("*")}, want: Decision{workerresult.InUse, "container c"}},
		"mounted by image id":    {img: img, containers: []cri.Container{{Name: "c", Image: "nginx:1", MountedImages: []string{id}}}, want: Decision{workerresult.InUse, "container c mounts it as an image volume"}},
		"mounted by tag":         {img: img, containers: []cri.Container{{Name: "c", MountedImages: []string{"alpine:3.19"}}}, want: Decision{workerresult.InUse, "container c mounts it as an image volume"}},
		"mounted by repo digest": {img: img, containers: []cri.Container{{Name: "c", MountedImages: []string{"docker.io/library/alpine@sha256:" + strings.Repeat("b", 64)}}}, want: Decision{workerresult.InUse, "container c mounts it as an image volume"}},
		"mounted by an exited container": {img: img, containers: []cri.Container{{ID: "abc", State: "CONTAINER_EXITED", MountedImages: []string{id}}},
			want: Decision{workerresult.InUse, "container abc mounts it as an image volume"}},
		"mounted by bare hex id": {img: cri.Image{ID: strings.Repeat("a", 64), Tags: []string{"example.com/data:1"}}, containers: []cri.Container{{Name: "c", MountedImages: []string{strings.Repeat("a", 64)}}},
			want: Decision{workerresult.InUse, "container c mounts it as an image volume"}},
		"another image mounted":  {img: img, containers: []cri.Container{{Name: "c", MountedImages: []string{"alpine:3.18", "sha256:" + strings.Repeat("c", 64)}}}},
		"mounted and run":        {img: img, containers: []cri.Container{{Name: "c", ImageRef: id, MountedImages: []string{id}}}, want: Decision{workerresult.InUse, "container c"}},
		"mounted beats excluded": {img: img, containers: []cri.Container{{Name: "c", MountedImages: []string{id}}}, policy: Policy{Exclusions: excl("*")}, want: Decision{workerresult.InUse, "container c mounts it as an image volume"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.policy.Check(tc.img, Keys(tc.img), NewContainers(tc.containers))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckExclusions: a prepared policy and an unprepared one decide
// alike and name the first matching pattern; a policy whose exclusions were
// replaced after Prepare judges by the new ones, never by a stale index.
func TestCheckExclusions(t *testing.T) {
	pats := func(in ...string) []imageref.Pattern {
		var out []imageref.Pattern
		for _, s := range in {
			p := imageref.ParsePattern(s)
			out = append(out, p)
		}
		return out
	}
	alpine := cri.Image{ID: "sha256:" + strings.Repeat("a", 64), Tags: []string{"docker.io/library/alpine:3.19"}}
	quay := cri.Image{ID: "sha256:" + strings.Repeat("c", 64), Tags: []string{"quay.io/team/app:1"}}
	list := pats("nginx:*", "quay.io/*", "library/*", "alpine:3.19")
	stale := Policy{Exclusions: pats("nginx:*")}.Prepare()
	stale.Exclusions = list
	cases := map[string]Policy{"prepared": Policy{Exclusions: list}.Prepare(), "unprepared": {Exclusions: list}, "replaced after Prepare": stale}
	for name, policy := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]Decision{}
			for _, img := range []cri.Image{alpine, quay, {ID: "sha256:" + strings.Repeat("d", 64), Tags: []string{"docker.io/team/x:1"}}} {
				got[img.ID[7:8]] = policy.Check(img, Keys(img), Containers{})
			}
			want := map[string]Decision{"a": {workerresult.Excluded, "exclusion library/*"}, "c": {workerresult.Excluded, "exclusion quay.io/*"}, "d": {}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCannotPullBack(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	cases := map[string]struct {
		img  cri.Image
		want bool
	}{
		"pulled":                       {cri.Image{Tags: []string{"docker.io/library/nginx:1"}, Digests: []string{"docker.io/library/nginx@sha256:" + hex}}, false},
		"pulled by digest only":        {cri.Image{Digests: []string{"quay.io/a/b@sha256:" + hex}}, false},
		"imported: tags, no digest":    {cri.Image{Tags: []string{"docker.io/library/airgap:1"}}, true},
		"localhost (Bottlerocket)":     {cri.Image{Tags: []string{"localhost/kubernetes/pause:0.1"}, Digests: []string{"localhost/kubernetes/pause@sha256:" + hex}}, true},
		"a registry on localhost:5000": {cri.Image{Tags: []string{"localhost:5000/a:1"}, Digests: []string{"localhost:5000/a@sha256:" + hex}}, false},
		"nameless (a tag moved away)":  {cri.Image{ID: "sha256:" + hex}, false},
		"localhost and a registry":     {cri.Image{Tags: []string{"localhost/a:1"}, Digests: []string{"localhost/a@sha256:" + hex, "quay.io/a@sha256:" + hex}}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CannotPullBack(tc.img); got != tc.want {
				t.Errorf("CannotPullBack(%+v) = %v, want %v", tc.img, got, tc.want)
			}
		})
	}
}
