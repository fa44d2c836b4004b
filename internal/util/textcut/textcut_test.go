package textcut

import (
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestCut(t *testing.T) {
	cases := map[string]struct {
		s    string
		max  int
		want string
	}{
		"shorter":                       {s: "abc", max: 10, want: "abc"},
		"exactly max":                   {s: "abcdefghij", max: 10, want: "abcdefghij"},
		"one byte over":                 {s: "abcdefghijk", max: 10, want: "abcdefg..."},
		"empty":                         {s: "", max: 10, want: ""},
		"a 2-byte rune across the cut":  {s: "abcdefé-tail", max: 10, want: "abcdef..."},
		"a 2-byte rune ending the cut":  {s: "abcdeé-tail", max: 10, want: "abcdeé..."},
		"a 3-byte rune across the cut":  {s: "abcde€-tail", max: 10, want: "abcde..."},
		"a 4-byte rune across the cut":  {s: "abcd😀-tail", max: 10, want: "abcd..."},
		"only multi-byte runes":         {s: "ééééééé", max: 10, want: "ééé..."},
		"no room but the ellipsis":      {s: "abcdef", max: 3, want: "..."},
		"less room than the ellipsis":   {s: "abcdef", max: 2, want: ".."},
		"a rune at the start, too long": {s: "😀😀", max: 6, want: "..."},
	}
	got := map[string]string{}
	want := map[string]string{}
	for name, c := range cases {
		out := Cut(c.s, c.max)
		if len(out) > c.max || !utf8.ValidString(out) {
			t.Errorf("%s: %q is %d bytes (max %d), valid UTF-8: %v", name, out, len(out), c.max, utf8.ValidString(out))
		}
		got[name], want[name] = out, c.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
