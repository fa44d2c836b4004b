package kname

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestShorten(t *testing.T) {
	long := strings.Repeat("a", 60) + ".b-" + strings.Repeat("c", 40)
	cases := map[string]struct {
		in   string
		max  int
		want string
	}{
		"fits":                 {in: "imagelist", max: 63, want: "imagelist"},
		"exactly the limit":    {in: strings.Repeat("x", 63), max: 63, want: strings.Repeat("x", 63)},
		"long, dot at the cut": {in: long, max: 63, want: strings.Repeat("a", 54) + "-" + Shorten(long, 63)[55:]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Shorten(tc.in, tc.max); got != tc.want {
				t.Errorf("Shorten = %q, want %q", got, tc.want)
			}
		})
	}
	if Shorten(long, 63) == Shorten(long+"x", 63) {
		t.Error("two long names shorten alike")
	}
}

// FuzzLabelValue: any valid object name gives a valid label value.
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"imagelist", strings.Repeat("a", 63), strings.Repeat("a.", 100) + "b", strings.Repeat("a-", 120) + "z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			return
		}
		if v := LabelValue(name); len(validation.IsValidLabelValue(v)) > 0 {
			t.Fatalf("LabelValue(%q) = %q: %v", name, v, validation.IsValidLabelValue(v))
		}
	})
}

// FuzzDNSLabel: any valid object name with a prefix gives a valid DNS label.
func FuzzDNSLabel(f *testing.F) {
	for _, s := range []string{"keep-system", "keep.system", strings.Repeat("a.", 100) + "b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			return
		}
		if v := DNSLabel("exclude-" + name); len(validation.IsDNS1123Label(v)) > 0 {
			t.Fatalf("DNSLabel(%q) = %q: %v", name, v, validation.IsDNS1123Label(v))
		}
	})
}

func TestDNSLabel(t *testing.T) {
	if got := DNSLabel("exclude-keep-system"); got != "exclude-keep-system" {
		t.Errorf("a valid label changed: %q", got)
	}
	if a, b := DNSLabel("exclude-a.b"), DNSLabel("exclude-a-b"); a == b || !strings.HasPrefix(a, "exclude-a-b-") {
		t.Errorf("DNSLabel(a.b) = %q, DNSLabel(a-b) = %q", a, b)
	}
}
