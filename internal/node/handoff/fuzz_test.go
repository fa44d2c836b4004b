package handoff

import (
	"testing"
)

// FuzzDecode: a payload decodes into image IDs only, or is an error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`[{"image_id":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","names":["a:1"],"digests":[]}]`,
		`[]`, `null`, ``, `[{"image_id":"*"}]`, `[{"image_id":"alpine"}]`, `[{"image_id":1}]`, `[{"image_id":"sha256:aa`,
		`[][]`, `{"image_id":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		images, err := Decode(data)
		if err != nil {
			return
		}
		if images == nil {
			t.Fatal("nil list without an error")
		}
		for _, img := range images {
			if _, ok := NormalID(img.ImageID); !ok {
				t.Errorf("accepted image_id %q", img.ImageID)
			}
		}
	})
}
