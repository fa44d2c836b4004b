package cri

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// encodeImage writes an Image as containerd does, with fields this client
// skips (labels, target) among the ones it reads.
func encodeImage(t testing.TB, name string, created, updated time.Time) []byte {
	t.Helper()
	var b []byte
	b = protowire.AppendTag(b, imageName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	var label []byte
	label = protowire.AppendTag(label, 1, protowire.BytesType)
	label = protowire.AppendString(label, "io.cri-containerd.image")
	label = protowire.AppendTag(label, 2, protowire.BytesType)
	label = protowire.AppendString(label, "managed")
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, label)
	var target []byte
	target = protowire.AppendTag(target, 1, protowire.BytesType)
	target = protowire.AppendString(target, "application/vnd.oci.image.index.v1+json")
	target = protowire.AppendTag(target, 3, protowire.VarintType)
	target = protowire.AppendVarint(target, 1234)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, target)
	for num, at := range map[protowire.Number]time.Time{imageCreatedAt: created, imageUpdatedAt: updated} {
		if at.IsZero() {
			continue
		}
		ts, err := proto.Marshal(timestamppb.New(at))
		if err != nil {
			t.Fatal(err)
		}
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, ts)
	}
	return b
}

func encodeResponse(images ...[]byte) []byte {
	var b []byte
	for _, img := range images {
		b = protowire.AppendTag(b, listImagesResponseImages, protowire.BytesType)
		b = protowire.AppendBytes(b, img)
	}
	return b
}

func TestDecodeListImagesResponse(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	t1 := t0.Add(90 * time.Minute)
	resp := encodeResponse(
		encodeImage(t, "example.com/app:1", t0, t1),
		encodeImage(t, "sha256:abc", t1, t0),
		encodeImage(t, "example.com/app@sha256:def", t0, time.Time{}),
		encodeImage(t, "no-times", time.Time{}, time.Time{}),
		encodeImage(t, "", t0, t1),
	)
	// A field a newer containerd may add, at the top level, is skipped.
	resp = protowire.AppendTag(resp, 9, protowire.Fixed64Type)
	resp = protowire.AppendFixed64(resp, 7)

	got, err := decodeListImagesResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{"example.com/app:1": t1, "sha256:abc": t1, "example.com/app@sha256:def": t0}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for name, w := range want {
		if !got[name].Equal(w) {
			t.Errorf("%s: %v, want %v", name, got[name], w)
		}
	}

	if got, err := decodeListImagesResponse(nil); err != nil || len(got) != 0 {
		t.Errorf("empty response: %v, %v", got, err)
	}
}

func TestDecodeListImagesResponseMalformed(t *testing.T) {
	good := encodeResponse(encodeImage(t, "a:1", time.Unix(100, 0), time.Time{}))
	wrongType := protowire.AppendTag(nil, listImagesResponseImages, protowire.VarintType)
	wrongType = protowire.AppendVarint(wrongType, 1)
	badName := encodeResponse(protowire.AppendVarint(protowire.AppendTag(nil, imageName, protowire.VarintType), 3))
	for name, b := range map[string][]byte{
		"truncated":       good[:len(good)-1],
		"images a varint": wrongType,
		"name a varint":   badName,
		"field zero":      {0x00},
	} {
		if got, err := decodeListImagesResponse(b); err == nil {
			t.Errorf("%s: got %v, want an error", name, got)
		}
	}
}

// FuzzDecodeListImages: the runtime's reply is outside input; the decoder
// never panics, and names only records that carry a time.
func FuzzDecodeListImages(f *testing.F) {
	f.Add(encodeResponse(encodeImage(f, "example.com/app:1", time.Unix(1e9, 5), time.Unix(2e9, 0))))
	f.Add(encodeResponse(encodeImage(f, "sha256:abc", time.Time{}, time.Unix(1, 0)), []byte{0x0a, 0x00}))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x05, 0x3a, 0x03, 0x08, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeListImagesResponse(b)
		if err != nil {
			return
		}
		for name, at := range got {
			if name == "" || at.IsZero() {
				t.Errorf("record %q at %v", name, at)
			}
		}
	})
}
