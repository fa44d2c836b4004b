package registrycheck

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Credential is a user name and password for one registry host.
type Credential struct {
	Username, Password string
}

// Credentials are the operator's credentials by registry host (with port,
// as images name it; docker.io for Docker Hub).
type Credentials map[string]Credential

// maxConfigSize bounds the docker config file read: a Secret holds at most
// 1 MiB.
const maxConfigSize = 1 << 20

// ReadDockerConfig reads a docker config.json file (a Secret of type
// kubernetes.io/dockerconfigjson, mounted): its auths.
func ReadDockerConfig(path string) (Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxConfigSize)
	}
	creds, err := ParseDockerConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return creds, nil
}

// ParseDockerConfig reads the auths of a docker config.json: each entry's
// auth (base64 of user:password) or its username and password. Keys may
// be hosts or URLs (https://index.docker.io/v1/); they are read as hosts.
// An entry with neither is an error, so that a Secret that would
// authenticate nothing is told, not silently ignored.
func ParseDockerConfig(data []byte) (Credentials, error) {
	var doc struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a docker config.json: %w", err)
	}
	creds := Credentials{}
	for key, e := range doc.Auths {
		host := configHost(key)
		if host == "" {
			return nil, fmt.Errorf("auths[%q]: names no registry host", key)
		}
		c := Credential{Username: e.Username, Password: e.Password}
		if e.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(e.Auth))
			if err != nil {
				return nil, fmt.Errorf("auths[%q].auth: not base64: %w", key, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("auths[%q].auth: not user:password", key)
			}
			c = Credential{Username: user, Password: pass}
		}
		if c.Username == "" && c.Password == "" {
			if e.IdentityToken != "" {
				return nil, fmt.Errorf("auths[%q]: an identity token alone is not supported; give auth or username and password", key)
			}
			return nil, fmt.Errorf("auths[%q]: neither auth nor username and password", key)
		}
		creds[host] = c
	}
	return creds, nil
}

// configHost is the registry host a config key names: the key without
// scheme and path, Docker Hub's names as docker.io.
func configHost(key string) string {
	k := strings.TrimSpace(key)
	if i := strings.Index(k, "://"); i >= 0 {
		k = k[i+3:]
	}
	k, _, _ = strings.Cut(k, "/")
	k = strings.ToLower(k)
	switch k {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return dockerHub
	}
	return k
}

// For is the credential for a host (an image's registry host, or a
// mirror's).
func (c Credentials) For(host string) (Credential, bool) {
	cred, ok := c[configHost(host)]
	return cred, ok
}
