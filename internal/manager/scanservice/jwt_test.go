package scanservice

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPeekClaims(t *testing.T) {
	seg := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	head := seg(`{"alg":"RS256"}`)
	for name, tc := range map[string]struct {
		token string
		want  tokenClaims
		bad   bool
	}{
		"a pod-bound ServiceAccount token": {
			token: head + "." + seg(`{"aud":["a","b"],"sub":"s","exp":1900000000,"kubernetes.io":{"pod":{"name":"p","uid":"u"}}}`) + ".sig",
			want:  tokenClaims{Audiences: []string{"a", "b"}, Subject: "s", Expiry: time.Unix(1900000000, 0), PodName: "p", PodUID: "u"},
		},
		"one audience as a string": {
			token: head + "." + seg(`{"aud":"a","sub":"s"}`) + ".sig",
			want:  tokenClaims{Audiences: []string{"a"}, Subject: "s"},
		},
		"padded segments": {
			token: base64.URLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + base64.URLEncoding.EncodeToString([]byte(`{"sub":"s"}`)) + ".sig",
			want:  tokenClaims{Subject: "s"},
		},
		"an exp out of range": {
			token: head + "." + seg(`{"sub":"s","exp":1e300}`) + ".sig",
			want:  tokenClaims{Subject: "s"},
		},
		"random text":           {token: "Zm9yZ2Vk", bad: true},
		"two segments":          {token: head + "." + seg(`{}`), bad: true},
		"four segments":         {token: head + "." + seg(`{}`) + ".a.b", bad: true},
		"an empty signature":    {token: head + "." + seg(`{}`) + ".", bad: true},
		"unsigned":              {token: seg(`{"alg":"none"}`) + "." + seg(`{"sub":"s"}`) + ".sig", bad: true},
		"no alg":                {token: seg(`{}`) + "." + seg(`{"sub":"s"}`) + ".sig", bad: true},
		"not base64":            {token: head + ".!!!.sig", bad: true},
		"claims not JSON":       {token: head + "." + seg(`sub`) + ".sig", bad: true},
		"aud neither":           {token: head + "." + seg(`{"aud":3}`) + ".sig", bad: true},
		"a sub of another type": {token: head + "." + seg(`{"sub":[1]}`) + ".sig", bad: true},
		"longer than any token": {token: head + "." + seg(`{"sub":"`+strings.Repeat("s", maxTokenBytes)+`"}`) + ".sig", bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := peekClaims(tc.token)
			if (err != nil) != tc.bad {
				t.Fatalf("error %v, want one: %v", err, tc.bad)
			}
			if diff := cmp.Diff(tc.want, got); !tc.bad && diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzPeekClaims: the claims of any bearer string, which anyone on the pod
// network can send, are read without a panic, and only from a token of
// three non-empty segments within the size bound.
func FuzzPeekClaims(f *testing.F) {
	for _, seed := range []string{
		jwt(scannerClaims()),
		jwt(map[string]any{"aud": "x", "sub": 1}),
		jwt(map[string]any{"kubernetes.io": []int{1}}),
		jwt(map[string]any{"exp": -1, "aud": nil}),
		"eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
		"eyJhbGciOiJSUzI1NiJ9.W10.c2ln",
		"a.b.c", "..", "forged", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := peekClaims(token)
		if err != nil {
			return
		}
		parts := strings.Split(token, ".")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || len(token) > maxTokenBytes {
			t.Fatalf("claims %+v read from %q", c, token)
		}
	})
}
