package references

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNodeSetTooLarge: a node whose references do not fit says so, and
// its worker is told.
func TestNodeSetTooLarge(t *testing.T) {
	// Digests, which do not compress: 5,000 of them are over the limit.
	big := make([]Ref, 5000)
	for i := range big {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		big[i] = Ref{Image: "registry.example.com/app@sha256:" + hex.EncodeToString(sum[:]), Owner: Owner("Pod", "ns", "p")}
	}
	if got := EncodeNode(big); got != Incomplete {
		t.Fatalf("a %d-reference node set encodes to %d bytes, want Incomplete", len(big), len(got))
	}
	complete, err := ScanNode(strings.NewReader(Incomplete), func(Ref) { t.Error("an incomplete set has no references") })
	if err != nil || complete {
		t.Fatalf("ScanNode(Incomplete) = %v, %v", complete, err)
	}
	if got := EncodeNode(refs(100)); len(got) > MaxNodeBytes || got == Incomplete {
		t.Fatalf("100 references: %d bytes", len(got))
	}
}

// TestNodeSetForms: the compressed set reads back as written and is a
// fraction of the plain one; the plain form (pods built before the sets were
// compressed) still reads; damage to the compressed form is refused, never
// read as a shorter set.
func TestNodeSetForms(t *testing.T) {
	in := refs(110)
	var plain strings.Builder
	plain.WriteString(nodeHeader)
	for _, r := range Dedupe(slices.Clone(in)) {
		plain.WriteString(r.Image + "\t" + r.Owner + "\n")
	}
	enc := EncodeNode(slices.Clone(in))
	if !strings.HasPrefix(enc, nodeHeaderGzip) || 2*len(enc) > plain.Len() {
		t.Errorf("compressed set: %d bytes, plain %d; want the compressed header and under half", len(enc), plain.Len())
	}
	body := strings.TrimPrefix(enc, nodeHeaderGzip)
	cases := map[string]struct {
		in      string
		want    []Ref
		invalid bool
	}{
		"compressed":                {in: enc, want: Dedupe(slices.Clone(in))},
		"plain":                     {in: plain.String(), want: Dedupe(slices.Clone(in))},
		"empty node, compressed":    {in: EncodeNode(nil)},
		"compressed, cut short":     {in: enc[:len(nodeHeaderGzip)+len(body)/2], invalid: true},
		"compressed, not base64":    {in: nodeHeaderGzip + "!!!!" + body, invalid: true},
		"compressed, not gzip":      {in: nodeHeaderGzip + base64.StdEncoding.EncodeToString([]byte("nginx\tPod a/b\n")), invalid: true},
		"compressed, garbage after": {in: enc + "QUJD", invalid: true},
		"no header":                 {in: "nginx\tPod a/b\n", invalid: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []Ref
			complete, err := ScanNode(strings.NewReader(tc.in), func(r Ref) { got = append(got, r) })
			if tc.invalid {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("ScanNode = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || !complete {
				t.Fatalf("ScanNode = %v, %v", complete, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
