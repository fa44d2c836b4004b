package imageref

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// decision is what a matcher decided for one image: the pattern that
// protects it, as written, or "" when none does.
func decision(p Pattern, ok bool) string {
	if !ok {
		return ""
	}
	return p.String()
}

func mustPatterns(t testing.TB, in []string) []Pattern {
	t.Helper()
	var out []Pattern
	for _, s := range in {
		out = append(out, ParsePattern(s))
	}
	return out
}

func TestExclusionsMatch(t *testing.T) {
	hub := Image{ID: idB, Tags: []string{"docker.io/team/tool:v1"}, Digests: []string{"docker.io/team/tool@" + digA}}
	deep := Image{ID: idB, Tags: []string{"registry.example.com:5000/a/b/c:1"}}
	cases := map[string]struct {
		patterns []string
		img      Image
		want     string
	}{
		"no patterns":                    {img: alpine},
		"first of two matching":          {patterns: []string{"nginx:*", "alpine:*", "docker.io/library/*"}, img: alpine, want: "alpine:*"},
		"later form first in list":       {patterns: []string{"docker.io/library/*", "alpine:3.19"}, img: alpine, want: "docker.io/library/*"},
		"star after others":              {patterns: []string{"nginx", "*", "alpine"}, img: alpine, want: "*"},
		"star first":                     {patterns: []string{"*", "alpine"}, img: alpine, want: "*"},
		"duplicates name the first":      {patterns: []string{"alpine:3.19", "docker.io/library/alpine:3.19"}, img: alpine, want: "alpine:3.19"},
		"short name is latest":           {patterns: []string{"alpine"}, img: alpine, want: "alpine"},
		"tag miss":                       {patterns: []string{"alpine:3.18", "nginx:*"}, img: alpine},
		"image id":                       {patterns: []string{"nginx", idA}, img: alpine, want: idA},
		"bare image id":                  {patterns: []string{strings.TrimPrefix(idA, "sha256:")}, img: alpine, want: strings.TrimPrefix(idA, "sha256:")},
		"repo digest's digest":           {patterns: []string{digA}, img: alpine, want: digA},
		"repo@digest":                    {patterns: []string{"alpine@" + digA}, img: alpine, want: "alpine@" + digA},
		"id is not a repo digest":        {patterns: []string{"alpine@" + idA}, img: alpine},
		"tag and digest pattern":         {patterns: []string{"alpine:9@" + digA}, img: alpine, want: "alpine:9@" + digA},
		"repo:* by repo digest only":     {patterns: []string{"team/tool:*"}, img: Image{ID: idB, Digests: hub.Digests}, want: "team/tool:*"},
		"user repo under docker hub":     {patterns: []string{"quay.io/*", "docker.io/*"}, img: hub, want: "docker.io/*"},
		"index.docker.io is docker hub":  {patterns: []string{"index.docker.io/*"}, img: hub, want: "index.docker.io/*"},
		"user path":                      {patterns: []string{"team/*"}, img: hub, want: "team/*"},
		"library is not a user":          {patterns: []string{"team/*"}, img: alpine},
		"path is not a string prefix":    {patterns: []string{"docker.io/lib/*", "docker.io/library/alp/*"}, img: alpine},
		"repository is not under itself": {patterns: []string{"docker.io/library/alpine/*"}, img: alpine},
		"deep path, every level":         {patterns: []string{"registry.example.com:5000/a/b/*"}, img: deep, want: "registry.example.com:5000/a/b/*"},
		"deep path, registry":            {patterns: []string{"nginx:*", "registry.example.com:5000/*"}, img: deep, want: "registry.example.com:5000/*"},
		"port is part of the registry":   {patterns: []string{"registry.example.com/*", "registry.example.com:5001/*"}, img: deep},
		"repo:* with port":               {patterns: []string{"registry.example.com:5000/a/b/c:*"}, img: deep, want: "registry.example.com:5000/a/b/c:*"},
		// Upstream's prefix is the text before the first ":", the host.
		"repo:* of a parent, same host":   {patterns: []string{"registry.example.com:5000/a/b:*"}, img: deep, want: "registry.example.com:5000/a/b:*"},
		"repo:* of a sibling":             {patterns: []string{"quay.io/a/x:*"}, img: Image{ID: idB, Tags: []string{"quay.io/a/b/c:1"}}},
		"unqualified runtime tag":         {patterns: []string{"docker.io/library/busybox:*"}, img: Image{ID: idB, Tags: []string{"busybox:1"}}, want: "docker.io/library/busybox:*"},
		"garbage runtime names":           {patterns: []string{"library/*", "sha256:" + strings.Repeat("0", 64)}, img: Image{ID: "x", Tags: []string{"<none>:<none>"}, Digests: []string{"<none>@<none>"}}},
		"untagged runtime tag is ignored": {patterns: []string{"alpine:*", "alpine"}, img: Image{ID: idB, Tags: []string{"docker.io/library/alpine"}}},
		"id without prefix on node":       {patterns: []string{idB}, img: Image{ID: strings.TrimPrefix(idB, "sha256:")}, want: idB},
		"second tag matches":              {patterns: []string{"alpine:latest"}, img: alpine, want: "alpine:latest"},
		"many forms, last one matches":    {patterns: []string{"quay.io/*", "nginx:*", "registry.example.com/alpine:3.19", "library/alpine:9", "library/*"}, img: alpine, want: "library/*"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pats := mustPatterns(t, tc.patterns)
			if diff := cmp.Diff(tc.want, decision(NewExclusions(pats).Match(tc.img))); diff != "" {
				t.Errorf("index (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, decision(linearMatch(pats, tc.img))); diff != "" {
				t.Errorf("linear reference (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExclusionsDifferential: for random images and random pattern sets of
// every form, the index decides as the linear reference does, pattern for
// pattern.
func TestExclusionsDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 6))
	matched := 0
	for trial := range 3000 {
		pats := randomPatterns(rng, rng.IntN(40))
		x := NewExclusions(pats)
		for range 5 {
			img := randomImage(rng)
			want := decision(linearMatch(pats, img))
			if want != "" {
				matched++
			}
			if diff := cmp.Diff(want, decision(x.Match(img))); diff != "" {
				t.Fatalf("trial %d: image %+v, patterns %v (-linear +index):\n%s", trial, img, pats, diff)
			}
		}
	}
	// The generator must make both decisions common, or the test says little.
	t.Logf("%d of 15000 images matched", matched)
	if matched < 3000 || matched > 12000 {
		t.Errorf("%d of 15000 images matched: the generator is off", matched)
	}
}

// TestNames: the keys Match looks up are Image.Keys, and the repositories
// those of the reference.
func TestNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		img := randomImage(rng)
		keys, repos := names(img)
		if diff := cmp.Diff(img.Keys(), keys, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%+v keys (-Keys +names):\n%s", img, diff)
		}
		if diff := cmp.Diff(linearRepositories(img), repos); diff != "" {
			t.Fatalf("%+v repositories (-reference +names):\n%s", img, diff)
		}
	}
}

// FuzzExclusions: patterns (one a line) and an image's names (tags and
// digests one a line): the index and the linear reference agree.
func FuzzExclusions(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 30 {
		var pats []string
		for _, p := range randomPatterns(rng, 1+rng.IntN(8)) {
			pats = append(pats, p.String())
		}
		img := randomImage(rng)
		f.Add(strings.Join(pats, "\n"), img.ID, strings.Join(img.Tags, "\n"), strings.Join(img.Digests, "\n"))
	}
	f.Add("*\nalpine", idA, "docker.io/library/alpine:1", "")
	f.Add("localhost:5000/*\nlocalhost:5000/a:*", "", "localhost:5000/a/b:1", "localhost:5000/a@"+digA)
	f.Fuzz(func(t *testing.T, patterns, id, tags, digests string) {
		var pats []Pattern
		for _, s := range strings.Split(patterns, "\n") {
			pats = append(pats, ParsePattern(s))
		}
		img := Image{ID: id, Tags: lines(tags), Digests: lines(digests)}
		want := decision(linearMatch(pats, img))
		if diff := cmp.Diff(want, decision(NewExclusions(pats).Match(img))); diff != "" {
			t.Fatalf("image %+v, patterns %q (-linear +index):\n%s", img, patterns, diff)
		}
	})
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
