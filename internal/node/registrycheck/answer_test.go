package registrycheck

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestJudge: what each of a registry's answers to a manifest HEAD means.
// Only a success is present: whatever else keeps the image as gone or
// unknown, never removes it on a guess.
func TestJudge(t *testing.T) {
	type want struct {
		Answer    Answer
		Detail    string
		Challenge bool
	}
	dnsErr := &url.Error{Op: "Head", URL: "https://r.example/v2/", Err: &net.DNSError{Err: "no such host", Name: "r.example", IsNotFound: true}}
	refused := &url.Error{Op: "Head", URL: "http://127.0.0.1:1/v2/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	for name, tc := range map[string]struct {
		status int
		code   string
		authed bool
		err    error
		want   want
	}{
		"200":                  {status: 200, want: want{Present, "200", false}},
		"404":                  {status: 404, want: want{Gone, "404 not found", false}},
		"404 MANIFEST_UNKNOWN": {status: 404, code: "MANIFEST_UNKNOWN", want: want{Gone, "404 MANIFEST_UNKNOWN", false}},
		"400 MANIFEST_UNKNOWN": {status: 400, code: "MANIFEST_UNKNOWN", want: want{Gone, "400 MANIFEST_UNKNOWN", false}},
		"401 first":            {status: 401, want: want{Unknown, "401 unauthorized", true}},
		"401 after auth":       {status: 401, authed: true, want: want{Unknown, "401 unauthorized after authenticating: the credentials were refused or lack pull access", false}},
		"403":                  {status: 403, authed: true, want: want{Unknown, "403 forbidden: the credentials lack pull access", false}},
		"429":                  {status: 429, want: want{Unknown, "429 too many requests: the registry's rate limit", false}},
		"503":                  {status: 503, want: want{Unknown, "503: the registry failed", false}},
		"302 left unfollowed":  {status: 302, want: want{Unknown, "unexpected status 302", false}},
		"timeout":              {err: &url.Error{Op: "Head", URL: "u", Err: context.DeadlineExceeded}, want: want{Unknown, "timeout: context deadline exceeded", false}},
		"DNS":                  {err: dnsErr, want: want{Unknown, "DNS: lookup r.example: no such host", false}},
		"connection refused":   {err: refused, want: want{Unknown, "connection: dial tcp: connection refused", false}},
	} {
		t.Run(name, func(t *testing.T) {
			a, d, c := Judge(tc.status, tc.code, tc.authed, tc.err)
			if diff := cmp.Diff(tc.want, want{a, d, c}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCombine: a mirror's present stands; its gone does not, and the
// registry is asked.
func TestCombine(t *testing.T) {
	reg := func(a Answer) func() Result { return func() Result { return Result{Answer: a, Detail: "registry"} } }
	for name, tc := range map[string]struct {
		mirrors  []Result
		registry Answer
		want     Result
	}{
		"no mirrors":                     {registry: Gone, want: Result{Answer: Gone, Detail: "registry"}},
		"mirror present":                 {mirrors: []Result{{Answer: Present, Detail: "m"}}, registry: Gone, want: Result{Answer: Present, Detail: "m"}},
		"mirror gone, registry has":      {mirrors: []Result{{Answer: Gone, Detail: "m"}}, registry: Present, want: Result{Answer: Present, Detail: "registry"}},
		"mirror gone, registry gone":     {mirrors: []Result{{Answer: Gone, Detail: "m"}}, registry: Gone, want: Result{Answer: Gone, Detail: "registry"}},
		"second mirror present":          {mirrors: []Result{{Answer: Unknown, Detail: "m1"}, {Answer: Present, Detail: "m2"}}, registry: Gone, want: Result{Answer: Present, Detail: "m2"}},
		"registry unknown, mirrors said": {mirrors: []Result{{Answer: Gone, Detail: "m1 404"}}, registry: Unknown, want: Result{Answer: Unknown, Detail: "registry (mirrors: m1 404)"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, combine(tc.mirrors, reg(tc.registry))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPick: the content asked about is the repo digest of the image's
// tag's repository, normalised as the runtime pulled it.
func TestPick(t *testing.T) {
	const d = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	type got struct {
		Content Content
		OK      bool
	}
	for name, tc := range map[string]struct {
		tags, digests []string
		want          got
	}{
		"docker hub short": {tags: []string{"nginx:1"}, digests: []string{"nginx@" + d}, want: got{Content{"docker.io", "library/nginx", d}, true}},
		"docker hub full":  {tags: []string{"docker.io/library/nginx:1"}, digests: []string{"docker.io/library/nginx@" + d}, want: got{Content{"docker.io", "library/nginx", d}, true}},
		"index.docker.io":  {digests: []string{"index.docker.io/library/nginx@" + d}, want: got{Content{"docker.io", "library/nginx", d}, true}},
		"tag's repository": {tags: []string{"r.example:5000/b/app:2"}, digests: []string{"mirror.example/a/app@" + d, "r.example:5000/b/app@" + d}, want: got{Content{"r.example:5000", "b/app", d}, true}},
		"untagged":         {digests: []string{"mirror.example/a/app@" + d}, want: got{Content{"mirror.example", "a/app", d}, true}},
		"no digest":        {tags: []string{"app:1"}},
		"bad digest":       {digests: []string{"app@sha256:12"}},
		"tag and digest":   {digests: []string{"app:1@" + d}},
	} {
		t.Run(name, func(t *testing.T) {
			c, ok := Pick(tc.tags, tc.digests)
			if diff := cmp.Diff(tc.want, got{c, ok}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseChallenge reads registries' challenges as they send them.
func TestParseChallenge(t *testing.T) {
	type got struct {
		C  Challenge
		OK bool
	}
	for name, tc := range map[string]struct {
		h    string
		want got
	}{
		"docker hub": {h: `Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull"`,
			want: got{Challenge{"bearer", map[string]string{"realm": "https://auth.docker.io/token", "service": "registry.docker.io", "scope": "repository:library/nginx:pull"}}, true}},
		"comma in scope": {h: `Bearer realm="https://a/t", scope="repository:x:pull,push"`,
			want: got{Challenge{"bearer", map[string]string{"realm": "https://a/t", "scope": "repository:x:pull,push"}}, true}},
		"escaped quote":                   {h: `Basic realm="a \"b\""`, want: got{Challenge{"basic", map[string]string{"realm": `a "b"`}}, true}},
		"unquoted":                        {h: `Bearer realm=https://a/t,service=reg`, want: got{Challenge{"bearer", map[string]string{"realm": "https://a/t", "service": "reg"}}, true}},
		"no params":                       {h: `Basic`, want: got{Challenge{"basic", map[string]string{}}, true}},
		"second challenge ends the first": {h: `Basic realm="r", Bearer realm="x"`, want: got{Challenge{"basic", map[string]string{"realm": "r"}}, true}},
		"unclosed quote":                  {h: `Bearer realm="https://a`},
		"empty":                           {h: ``},
	} {
		t.Run(name, func(t *testing.T) {
			c, ok := ParseChallenge(tc.h)
			if diff := cmp.Diff(tc.want, got{c, ok}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseChallenge(f *testing.F) {
	f.Add(`Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull"`)
	f.Add(`Basic realm="a \"b\""`)
	f.Add(`Bearer realm=x,,=,"`)
	f.Fuzz(func(t *testing.T, h string) {
		c, ok := ParseChallenge(h)
		if !ok {
			return
		}
		if c.Scheme == "" {
			t.Errorf("%q: a challenge without a scheme", h)
		}
	})
}
