package imageref

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	idA  = "sha256:2834dc507516af02784808c5f48b7cbe38b8ed5d0f4837f16e78d00deb7e7767"
	digA = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	idB  = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

// alpine is as containerd reports a pulled image.
var alpine = Image{
	ID:      idA,
	Tags:    []string{"docker.io/library/alpine:3.19", "docker.io/library/alpine:latest"},
	Digests: []string{"docker.io/library/alpine@" + digA},
}

var portRegistry = Image{ID: idB, Tags: []string{"registry.example.com:5000/team/app:v1"}}

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    Ref
		wantErr string
	}{
		"short name":         {in: "alpine", want: Ref{Kind: KindTagged, Repo: "docker.io/library/alpine", Tag: "latest"}},
		"short name tag":     {in: "alpine:3.19", want: Ref{Kind: KindTagged, Repo: "docker.io/library/alpine", Tag: "3.19"}},
		"full":               {in: "docker.io/library/alpine:3.19", want: Ref{Kind: KindTagged, Repo: "docker.io/library/alpine", Tag: "3.19"}},
		"user repo":          {in: "bitnami/redis:7", want: Ref{Kind: KindTagged, Repo: "docker.io/bitnami/redis", Tag: "7"}},
		"registry port":      {in: "registry.example.com:5000/team/app", want: Ref{Kind: KindTagged, Repo: "registry.example.com:5000/team/app", Tag: "latest"}},
		"digested":           {in: "alpine@" + digA, want: Ref{Kind: KindDigested, Repo: "docker.io/library/alpine", Digest: digA}},
		"tag and digest":     {in: "alpine:3.19@" + digA, want: Ref{Kind: KindDigested, Repo: "docker.io/library/alpine", Digest: digA}},
		"bare digest":        {in: idA, want: Ref{Kind: KindDigest, Digest: idA}},
		"bare id":            {in: strings.TrimPrefix(idA, "sha256:"), want: Ref{Kind: KindDigest, Digest: idA}},
		"prune all":          {in: "*", wantErr: "every unused image"},
		"empty":              {in: "", wantErr: "empty"},
		"space":              {in: "alpine 3", wantErr: "no spaces"},
		"short digest":       {in: "sha256:abc", wantErr: "64 lowercase hex"},
		"uppercase":          {in: "Alpine", wantErr: "not an image reference"},
		"too long":           {in: strings.Repeat("a", 513), wantErr: "longer than 512"},
		"bad digest in repo": {in: "alpine@sha256:zz", wantErr: "not an image reference"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefMatches(t *testing.T) {
	cases := map[string]struct {
		ref  string
		img  Image
		want bool
	}{
		"short name is latest":      {ref: "alpine", img: alpine, want: true},
		"short tag":                 {ref: "alpine:3.19", img: alpine, want: true},
		"full tag":                  {ref: "docker.io/library/alpine:3.19", img: alpine, want: true},
		"other tag":                 {ref: "alpine:3.18", img: alpine},
		"other repo same tag":       {ref: "library/nginx:3.19", img: alpine},
		"image id":                  {ref: idA, img: alpine, want: true},
		"bare image id":             {ref: strings.TrimPrefix(idA, "sha256:"), img: alpine, want: true},
		"repo digest's digest":      {ref: digA, img: alpine, want: true},
		"repo@digest":               {ref: "alpine@" + digA, img: alpine, want: true},
		"other repo@digest":         {ref: "nginx@" + digA, img: alpine},
		"id is not a repo digest":   {ref: "alpine@" + idA, img: alpine},
		"port registry":             {ref: "registry.example.com:5000/team/app:v1", img: portRegistry, want: true},
		"port registry other tag":   {ref: "registry.example.com:5000/team/app:v2", img: portRegistry},
		"unqualified runtime tag":   {ref: "docker.io/library/busybox:1", img: Image{ID: idB, Tags: []string{"busybox:1"}}, want: true},
		"garbage runtime tag":       {ref: "busybox:1", img: Image{ID: idB, Tags: []string{"<none>:<none>"}}},
		"id without prefix on node": {ref: idB, img: Image{ID: strings.TrimPrefix(idB, "sha256:")}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := Parse(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Matches(tc.img); got != tc.want {
				t.Errorf("Parse(%q).Matches = %v, want %v", tc.ref, got, tc.want)
			}
		})
	}
}

func TestPatternMatches(t *testing.T) {
	quay := Image{ID: idB, Tags: []string{"quay.io/prometheus/node-exporter:v1"}}
	team := Image{ID: idB, Tags: []string{"docker.io/team/tool:v1"}}
	cases := map[string]struct {
		pattern string
		img     Image
		want    bool
	}{
		"exact":               {pattern: "docker.io/library/alpine:3.19", img: alpine, want: true},
		"exact short":         {pattern: "alpine:3.19", img: alpine, want: true},
		"exact id":            {pattern: idA, img: alpine, want: true},
		"exact miss":          {pattern: "alpine:3.18", img: alpine},
		"all tags":            {pattern: "alpine:*", img: alpine, want: true},
		"all tags other repo": {pattern: "nginx:*", img: alpine},
		"all tags with port":  {pattern: "registry.example.com:5000/team/app:*", img: portRegistry, want: true},
		// Upstream read the text before the first ":", the bare host.
		"all tags port other repo, upstream's host": {pattern: "registry.example.com:5000/team/other:*", img: portRegistry, want: true},
		"all tags port other host":                  {pattern: "registry.example.com:5000/team/other:*", img: Image{ID: idB, Tags: []string{"quay.io/team/other:1"}}},
		"under library":                             {pattern: "docker.io/library/*", img: alpine, want: true},
		"under library short":                       {pattern: "library/*", img: alpine, want: true},
		"under registry":                            {pattern: "quay.io/*", img: quay, want: true},
		"under registry path":                       {pattern: "quay.io/prometheus/*", img: quay, want: true},
		"under other path":                          {pattern: "quay.io/other/*", img: quay},
		"under user":                                {pattern: "team/*", img: team, want: true},
		"under user not library":                    {pattern: "team/*", img: alpine},
		"under port registry":                       {pattern: "registry.example.com:5000/*", img: portRegistry, want: true},
		"prefix is not path prefix":                 {pattern: "docker.io/lib/*", img: alpine},
		"everything":                                {pattern: "*", img: alpine, want: true},
		"all of docker hub":                         {pattern: "docker.io/*", img: team, want: true},
		"docker hub not quay":                       {pattern: "docker.io/*", img: quay},
		"all tags by repo digest":                   {pattern: "alpine:*", img: Image{ID: idB, Digests: []string{"docker.io/library/alpine@" + digA}}, want: true},
		// Upstream's string prefixes are kept: what it protected stays
		// protected.
		"upstream's prefix: a longer repository":  {pattern: "docker.io/library/alpine:*", img: Image{ID: idB, Tags: []string{"docker.io/library/alpine-tools:1"}}, want: true},
		"upstream's prefix: a path below":         {pattern: "docker.io/library/alpine:*", img: Image{ID: idB, Tags: []string{"docker.io/library/alpine/sub:1"}}, want: true},
		"upstream's prefix: an unnormalised name": {pattern: "myapp:*", img: Image{ID: idB, Tags: []string{"myapp-sidecar:1"}}, want: true},
		"upstream's prefix: under a path":         {pattern: "docker.io/team/*", img: Image{ID: idB, Tags: []string{"docker.io/team/tool:v1"}}, want: true},
		"upstream's prefix: before a port":        {pattern: "registry.example.com:5000/team/other:*", img: Image{ID: idB, Tags: []string{"registry.example.com:6000/x:1"}}, want: true},
		"upstream's prefix: the host as text":     {pattern: "localhost:5000/team/app:*", img: Image{ID: idB, Tags: []string{"localhost/kubernetes/pause:0.1"}}, want: true},
		"upstream's prefix: a port in a glob":     {pattern: "registry.example.com:5000/*/app:*", img: Image{ID: idB, Tags: []string{"registry.example.com/x:1"}}, want: true},
		"upstream's prefix: a bare digest":        {pattern: "sha256:*", img: Image{ID: idB}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := ParsePattern(tc.pattern)
			if _, got := NewExclusions([]Pattern{p}).Match(tc.img); got != tc.want {
				t.Errorf("%q matches = %v, want %v", tc.pattern, got, tc.want)
			}
			if got := p.linearMatches(tc.img); got != tc.want {
				t.Errorf("%q matches (linear) = %v, want %v", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestParsePatternLegacy(t *testing.T) {
	pause := Image{ID: idB, Tags: []string{"registry.k8s.io/pause:3.9"}}
	nginx := Image{ID: idB, Tags: []string{"docker.io/library/nginx:1.25.3"}}
	nginx2 := Image{ID: idB, Tags: []string{"docker.io/library/nginx:2.0"}}
	odd := Image{ID: idB, Tags: []string{"Alpine latest"}}
	type want struct {
		Legacy  string
		Matches []bool
	}
	imgs := []Image{alpine, pause, nginx, nginx2, odd}
	cases := map[string]struct {
		in   string
		want want
	}{
		"documented form":       {in: "alpine:*", want: want{Matches: []bool{true, false, false, false, false}}},
		"lone star":             {in: "*", want: want{Legacy: LegacyAll, Matches: []bool{true, true, true, true, true}}},
		"tag glob":              {in: "nginx:1.*", want: want{Legacy: LegacyGlob, Matches: []bool{false, false, true, false, false}}},
		"full tag glob":         {in: "docker.io/library/nginx:1.*", want: want{Legacy: LegacyGlob, Matches: []bool{false, false, true, false, false}}},
		"library tag glob":      {in: "library/nginx:1.*", want: want{Legacy: LegacyGlob, Matches: []bool{false, false, true, false, false}}},
		"any registry":          {in: "*/pause:*", want: want{Legacy: LegacyGlob, Matches: []bool{false, true, false, false, false}}},
		"infix star":            {in: "alp*ne", want: want{Legacy: LegacyGlob, Matches: []bool{false, false, false, false, false}}},
		"infix star tagged":     {in: "alp*ne:*", want: want{Legacy: LegacyGlob, Matches: []bool{true, false, false, false, false}}},
		"star in path":          {in: "docker.io/*/nginx:*", want: want{Legacy: LegacyGlob, Matches: []bool{false, false, true, true, false}}},
		"double star":           {in: "**", want: want{Legacy: LegacyGlob, Matches: []bool{true, true, true, true, true}}},
		"bare slash":            {in: "/*", want: want{Legacy: LegacyGlob, Matches: []bool{false, false, false, false, false}}},
		"tag in repo":           {in: "alpine:3:*", want: want{Legacy: LegacyGlob, Matches: []bool{false, false, false, false, false}}},
		"empty upstream prefix": {in: ":*", want: want{Legacy: LegacyEmptyPrefix, Matches: []bool{true, true, true, true, true}}},
		"text":                  {in: "Alpine latest", want: want{Legacy: LegacyLiteral, Matches: []bool{false, false, false, false, true}}},
		"empty":                 {in: "", want: want{Legacy: LegacyLiteral, Matches: []bool{false, false, false, false, false}}},
		"bad digest":            {in: "sha256:12", want: want{Legacy: LegacyLiteral, Matches: []bool{false, false, false, false, false}}},
		"port, all tags":        {in: "registry.k8s.io:443/other:*", want: want{Legacy: LegacyPortPrefix, Matches: []bool{false, true, false, false, false}}},
		"port, path":            {in: "registry.k8s.io:443/*", want: want{Matches: []bool{false, false, false, false, false}}},
		"port, one image":       {in: "registry.k8s.io:443/pause:3.9", want: want{Matches: []bool{false, false, false, false, false}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := ParsePattern(tc.in)
			got := want{Legacy: p.Legacy()}
			for _, img := range imgs {
				_, ok := NewExclusions([]Pattern{p}).Match(img)
				if ok != p.linearMatches(img) {
					t.Errorf("%+v: index and linear matcher disagree", img)
				}
				got.Matches = append(got.Matches, ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParsePattern(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// upstreamMatches is upstream's matcher, as a model: the entry equals the
// image's ID, a tag or a bare digest, or, ending in "/*" or ":*", one of
// them starts with the text before "*" or before the first ":".
func upstreamMatches(s string, img Image) bool {
	names := append([]string{img.ID}, img.Tags...)
	for _, d := range img.Digests {
		if _, dig, ok := strings.Cut(d, "@"); ok {
			names = append(names, dig)
		}
	}
	prefix, isPrefix := "", false
	switch {
	case strings.HasSuffix(s, "/*"):
		prefix, isPrefix = strings.TrimSuffix(s, "*"), true
	case strings.HasSuffix(s, ":*"):
		prefix, _, _ = strings.Cut(s, ":")
		isPrefix = true
	}
	for _, n := range names {
		if n == s || isPrefix && strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// FuzzParse: Parse never panics; what it accepts has a normal form that
// parses back to the same reference, and a reference always matches an image
// that carries exactly that normal form.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"alpine", "alpine:3.19", "docker.io/library/alpine:3.19", "a@" + digA, idA, "localhost:5000/x/y:z", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(r.String())
		if err != nil || again != r {
			t.Fatalf("%q -> %q does not parse back: %v %+v", s, r.String(), err, again)
		}
		img := Image{ID: "sha256:" + strings.Repeat("0", 64)}
		switch r.Kind {
		case KindDigest:
			img.ID = r.Digest
		case KindDigested:
			img.Digests = []string{r.String()}
		case KindTagged:
			img.Tags = []string{r.String()}
		}
		if !r.Matches(img) {
			t.Fatalf("%q does not match an image carrying %q", s, r.String())
		}
	})
}

// FuzzPattern: every string is a pattern, and it protects every image
// that upstream's reading of it protected.
func FuzzPattern(f *testing.F) {
	for _, s := range []string{"alpine:*", "docker.io/library/*", "*", "quay.io/*", "a*b", idA, "nginx:1.*", "*/pause:*", ":*", "Alpine latest", "localhost:5000/app:*", "a*:5/b:*"} {
		f.Add(s, "docker.io/library/alpine:3.19", "docker.io/library/alpine@"+digA)
	}
	f.Fuzz(func(t *testing.T, s, tag, digest string) {
		p := ParsePattern(s)
		img := Image{ID: idB, Tags: []string{tag}, Digests: []string{digest}}
		_, got := NewExclusions([]Pattern{p}).Match(img)
		if got != p.linearMatches(img) {
			t.Fatalf("%q on %+v: index and linear matcher disagree", s, img)
		}
		if upstreamMatches(s, img) && !got {
			t.Fatalf("%q protected %+v upstream, not here", s, img)
		}
	})
}
