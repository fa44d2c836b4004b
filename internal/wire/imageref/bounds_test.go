package imageref

import (
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/google/go-cmp/cmp"
)

// TestMaxImageStringIsAboveEveryReference: the longest reference a runtime
// can pull is far under MaxImageString, and a string over it is no
// reference, or one whose registry host is longer than DNS allows:
// dropping it cannot unprotect an image a node pulled.
func TestMaxImageStringIsAboveEveryReference(t *testing.T) {
	// A host of 253 characters, the most DNS allows, in labels of 63.
	host := strings.Repeat(strings.Repeat("h", 63)+".", 3) + strings.Repeat("h", 61)
	// A repository path of exactly 255 characters.
	path := strings.Repeat("a/", 100)
	path += strings.Repeat("b", reference.RepositoryNameTotalLengthMax-len(path))
	name := host + ":65535/" + path
	tag := strings.Repeat("t", 128)
	digest := "sha256:" + strings.Repeat("0", 64)
	longest := "docker-pullable://" + name + ":" + tag + "@" + digest
	over := func(s string) string { return s + strings.Repeat("x", MaxImageString+1-len(s)) }
	cases := map[string]struct {
		s         string
		reference bool
	}{
		"the longest name":                   {s: name, reference: true},
		"the longest name and tag":           {s: name + ":" + tag, reference: true},
		"name, tag and digest":               {s: name + ":" + tag + "@" + digest, reference: true},
		"a path a character too long":        {s: host + "/" + path + "b"},
		"a tag a character too long":         {s: name + ":" + tag + "t"},
		"over the bound, a tag":              {s: over("nginx:")},
		"over the bound, a path":             {s: over("registry.example.com/" + strings.Repeat("a/", 1000))},
		"over the bound, random letters":     {s: over("A")},
		"over the bound, after a digest":     {s: over("nginx@" + digest)},
		"over the bound, after a scheme":     {s: over("docker-pullable://nginx:1")},
		"over the bound, a bare hex run":     {s: strings.Repeat("0", MaxImageString+1)},
		"over the bound, a digest prefix":    {s: over("sha256:")},
		"over the bound, a host DNS refuses": {s: strings.Repeat("h", MaxImageString) + ".example.com/app:1", reference: true},
	}
	if len(longest) > MaxImageString/4 {
		t.Errorf("the longest pullable reference with a scheme is %d bytes: the bound %d is no longer generous", len(longest), MaxImageString)
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		named, err := reference.ParseNormalizedNamed(tc.s)
		got[name], want[name] = err == nil, tc.reference
		if len(tc.s) <= MaxImageString {
			continue
		}
		if err == nil && len(reference.Domain(named)) <= 253 {
			t.Errorf("%s: a reference over the bound whose host DNS accepts", name)
		}
		if _, err := Parse(tc.s); err == nil {
			t.Errorf("%s: Parse accepts a string over the bound", name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a reference to the grammar (-want +got):\n%s", diff)
	}
}
