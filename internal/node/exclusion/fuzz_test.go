package exclusion

import (
	"strings"
	"testing"
)

// FuzzParse: any content either parses into valid patterns or errors; a
// list that parses has no data after its document.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"excluded":["docker.io/library/*","alpine:3.19"]}`, `{"excluded":["*"]}`, `{"excluded":[]}`, `{}`,
		`{"excluded":["a"]}{"excluded":["b"]}`, `{"excluded":["a"]} x`, `{"excluded":["al*ne"]}`, ``, `null`, `[]`,
		"{\"excluded\":[\"a\"]}\n", `{"excluded":[""]}`, `{"exclude":["a"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pats, err := Parse("fuzz.json", data)
		if err != nil {
			if pats != nil {
				t.Errorf("patterns with an error: %v", pats)
			}
			return
		}
		for _, p := range pats {
			if p.String() == "" {
				t.Errorf("empty pattern from %q", data)
			}
		}
		if strings.Count(string(data), "{") == 0 {
			t.Errorf("%q parsed without a document", data)
		}
	})
}
