package workerresult

import (
	"testing"
)

// FuzzDecode: the manager decodes whatever a container left as its
// termination message; that never panics, and a decoded summary encodes
// back under the kubelet's limit.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"component":"remover","counts":{"removed":3,"failed":1},"bytesFreed":10,"error":"1 of 4 removals failed; first: x: y"}`,
		`{"counts":null}`, ``, `null`, `{"counts":{"removed":-1}}`, `{"failures":[{"image":"a","message":"b","invalid":true}]}`,
		`{"sandboxImageGuessed":true,"maxRecheckWindowMs":1.5}`, `[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		if out := s.Encode(); len(out) > MaxSize {
			t.Errorf("encoded summary is %d bytes", len(out))
		}
	})
}
