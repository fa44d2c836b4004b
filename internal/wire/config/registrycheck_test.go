package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRegistryCheck reads manager.retention.registryCheck in every
// version; the zero value is the default (on, the workers' defaults).
func TestRegistryCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		section string
		want    RegistryCheck
	}{
		"unset": {section: "{}"},
		"null":  {section: "{registryCheck: null}"},
		"off":   {section: "{registryCheck: {enabled: false}}", want: RegistryCheck{Disabled: true}},
		"every key": {
			section: `{registryCheck: {enabled: true, lookback: 72h, maxRequestsPerRun: 20, timeout: 2s, whenUnreachable: remove, credentialsSecret: registry-creds,
				mirrors: {docker.io: [mirror.example.com, "https://m2.example.com/v2-proxy"], "registry.example.com:5000": ["127.0.0.1:5001"]}, plainHTTP: ["127.0.0.1:5001", "localhost:5000"]}}`,
			want: RegistryCheck{Lookback: 72 * time.Hour, MaxRequests: 20, Timeout: 2 * time.Second, RemoveUnreachable: true, CredentialsSecret: "registry-creds",
				Mirrors:   map[string][]string{"docker.io": {"mirror.example.com", "https://m2.example.com/v2-proxy"}, "registry.example.com:5000": {"127.0.0.1:5001"}},
				PlainHTTP: []string{"127.0.0.1:5001", "localhost:5000"}},
		},
		"requests as a string": {section: "{registryCheck: {maxRequestsPerRun: '5', whenUnreachable: keep}}", want: RegistryCheck{MaxRequests: 5}},
	} {
		for version, doc := range retentionDocs(tc.section) {
			t.Run(name+"/"+version, func(t *testing.T) {
				cfg, _, err := Parse([]byte(doc))
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if diff := cmp.Diff(tc.want, cfg.Manager.Retention.RegistryCheck); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestRegistryCheckErrors: each refusal names its key's path.
func TestRegistryCheckErrors(t *testing.T) {
	const p = "manager.retention.registryCheck."
	for name, tc := range map[string]struct {
		section string
		paths   []string
		want    []string
	}{
		"zero lookback":            {section: "{lookback: 0s}", paths: []string{p + "lookback"}, want: []string{"must be greater than zero"}},
		"timeout too long":         {section: "{timeout: 10m}", paths: []string{p + "timeout"}, want: []string{"must be at most 1m0s"}},
		"no requests":              {section: "{maxRequestsPerRun: 0}", paths: []string{p + "maxRequestsPerRun"}, want: []string{"between 1 and 10000"}},
		"when unreachable":         {section: "{whenUnreachable: ask}", paths: []string{p + "whenUnreachable"}, want: []string{`"keep", "remove"`}},
		"secret name":              {section: "{credentialsSecret: Registry_Creds}", paths: []string{p + "credentialsSecret"}},
		"mirror host a URL":        {section: "{mirrors: {'https://docker.io': [m.example]}}", paths: []string{p + "mirrors[https://docker.io]"}, want: []string{"registry host"}},
		"mirror without endpoints": {section: "{mirrors: {docker.io: []}}", paths: []string{p + "mirrors[docker.io]"}, want: []string{"1 to 16 endpoints"}},
		"mirror endpoint":          {section: "{mirrors: {docker.io: ['ftp://m.example', ok.example]}}", paths: []string{p + "mirrors[docker.io][0]"}, want: []string{"http(s) URL"}},
		"plain host with path":     {section: "{plainHTTP: [localhost:5000/v2]}", paths: []string{p + "plainHTTP[0]"}},
		"unknown key":              {section: "{mirror: {}}", paths: []string{p + "mirror"}, want: []string{`did you mean "mirrors"?`}},
	} {
		for version, doc := range retentionDocs("{registryCheck: " + tc.section + "}") {
			t.Run(name+"/"+version, func(t *testing.T) {
				cfg, _, err := Parse([]byte(doc))
				if err == nil {
					t.Fatalf("accepted: %+v", cfg.Manager.Retention.RegistryCheck)
				}
				if diff := cmp.Diff(tc.paths, errorPaths(t, err)); diff != "" {
					t.Errorf("error paths (-want +got):\n%s\nerror: %v", diff, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\ndoes not mention %q", err, w)
					}
				}
			})
		}
	}
}

func TestRegistryCheckWarnings(t *testing.T) {
	_, got, err := Parse([]byte(retentionDocs("{registryCheck: {enabled: false, credentialsSecret: creds}}")[VersionV1alpha3]))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"manager.retention.registryCheck.enabled: is false: credentialsSecret, mirrors and plainHTTP have no effect"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
