package registrycheck

import (
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseDockerConfig reads the auths a kubernetes.io/dockerconfigjson
// Secret holds, by host, and refuses what would authenticate nothing.
func TestParseDockerConfig(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	type got struct {
		Creds Credentials
		Err   string
	}
	for name, tc := range map[string]struct {
		doc  string
		want got
	}{
		"auth": {doc: `{"auths":{"r.example:5000":{"auth":"` + b64("u:p:q") + `"}}}`,
			want: got{Creds: Credentials{"r.example:5000": {"u", "p:q"}}}},
		"username and password": {doc: `{"auths":{"https://R.example/v2/":{"username":"u","password":"p"}}}`,
			want: got{Creds: Credentials{"r.example": {"u", "p"}}}},
		"docker hub's index URL": {doc: `{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("u:p") + `"}}}`,
			want: got{Creds: Credentials{"docker.io": {"u", "p"}}}},
		"no auths":       {doc: `{}`, want: got{Creds: Credentials{}}},
		"not JSON":       {doc: `auths`, want: got{Err: "not a docker config.json: invalid character 'a' looking for beginning of value"}},
		"not base64":     {doc: `{"auths":{"r":{"auth":"!!"}}}`, want: got{Err: `auths["r"].auth: not base64: illegal base64 data at input byte 0`}},
		"no colon":       {doc: `{"auths":{"r":{"auth":"` + b64("up") + `"}}}`, want: got{Err: `auths["r"].auth: not user:password`}},
		"nothing":        {doc: `{"auths":{"r":{}}}`, want: got{Err: `auths["r"]: neither auth nor username and password`}},
		"identity token": {doc: `{"auths":{"r":{"identitytoken":"t"}}}`, want: got{Err: `auths["r"]: an identity token alone is not supported; give auth or username and password`}},
		"no host":        {doc: `{"auths":{"https:///v1/":{"auth":"` + b64("u:p") + `"}}}`, want: got{Err: `auths["https:///v1/"]: names no registry host`}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := ParseDockerConfig([]byte(tc.doc))
			g := got{Creds: c}
			if err != nil {
				g.Err = err.Error()
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCredentialsFor(t *testing.T) {
	c := Credentials{"docker.io": {"hub", "p"}, "r.example:5000": {"r", "p"}}
	got := map[string]string{}
	for _, h := range []string{"docker.io", "registry-1.docker.io", "index.docker.io", "r.example:5000", "r.example"} {
		cred, _ := c.For(h)
		got[h] = cred.Username
	}
	want := map[string]string{"docker.io": "hub", "registry-1.docker.io": "hub", "index.docker.io": "hub", "r.example:5000": "r", "r.example": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzParseDockerConfig: whatever a Secret holds, the parser returns
// credentials keyed by a host, or an error.
func FuzzParseDockerConfig(f *testing.F) {
	f.Add([]byte(`{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"}}}`))
	f.Add([]byte(`{"auths":{"r":{"username":"u","password":"p"}}}`))
	f.Add([]byte(`{"auths":{"":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseDockerConfig(data)
		if err != nil {
			return
		}
		for h, cred := range c {
			if h == "" {
				t.Errorf("credentials for no host: %+v", cred)
			}
			if cred.Username == "" && cred.Password == "" {
				t.Errorf("%s: empty credentials", h)
			}
		}
	})
}
