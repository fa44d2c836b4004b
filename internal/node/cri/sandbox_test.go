package cri

import (
	"strings"
	"testing"
)

func TestSandboxImageParsers(t *testing.T) {
	status := map[string]struct {
		info map[string]string
		want string
	}{
		"containerd 1.x":  {info: map[string]string{"config": `{"sandboxImage":"registry.k8s.io/pause:3.10"}`}, want: "registry.k8s.io/pause:3.10"},
		"containerd 2.x":  {info: map[string]string{"config": `{"pinnedImages":{"sandbox":"registry.k8s.io/pause:3.10"}}`}, want: "registry.k8s.io/pause:3.10"},
		"no config":       {info: map[string]string{}},
		"not json":        {info: map[string]string{"config": `sandbox_image = "x"`}},
		"wrong type":      {info: map[string]string{"config": `{"sandboxImage":3}`}},
		"nothing in it":   {info: map[string]string{"config": `{}`}},
		"trailing fields": {info: map[string]string{"config": `{"sandboxImage":"p:1","other":{"a":[1,2]}}`}, want: "p:1"},
	}
	for name, tc := range status {
		t.Run("status/"+name, func(t *testing.T) {
			if got := sandboxImageFromInfo(tc.info); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	sandbox := map[string]struct {
		info map[string]string
		want string
	}{
		"containerd":  {info: map[string]string{"info": `{"pid":1,"image":"registry.k8s.io/pause:3.10","snapshotter":"overlayfs"}`}, want: "registry.k8s.io/pause:3.10"},
		"no info":     {info: nil},
		"not json":    {info: map[string]string{"info": `image: x`}},
		"no image":    {info: map[string]string{"info": `{"pid":1}`}},
		"blank image": {info: map[string]string{"info": `{"image":"  "}`}},
	}
	for name, tc := range sandbox {
		t.Run("sandbox/"+name, func(t *testing.T) {
			if got := sandboxImageFromSandboxInfo(tc.info); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzSandboxImage: the runtime's verbose status is outside input; the
// parsers never panic, and name an image only from a JSON string.
func FuzzSandboxImage(f *testing.F) {
	for _, s := range []string{
		`{"sandboxImage":"registry.k8s.io/pause:3.10"}`, `{"pinnedImages":{"sandbox":"p:1"}}`, `{}`, ``, `null`,
		`{"sandboxImage":3}`, `{"pid":1,"image":"registry.k8s.io/pause:3.10"}`, `{"image":" "}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_ = sandboxImageFromInfo(map[string]string{"config": raw})
		img := sandboxImageFromSandboxInfo(map[string]string{"info": raw})
		if img != strings.TrimSpace(img) {
			t.Errorf("untrimmed %q from %q", img, raw)
		}
		if img != "" && !strings.Contains(raw, `"`) {
			t.Errorf("%q from %q, which has no JSON string", img, raw)
		}
	})
}
