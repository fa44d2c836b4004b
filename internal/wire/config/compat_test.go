package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

// TestUpstreamValues: every value upstream Eraser documented or accepted,
// in the versions where it accepted it, parses here with upstream's effect,
// or with a warning where that effect was none. The documents are written
// from upstream's documented keys (its customization docs, its Go types per
// version, its runtime tests and e2e).
func TestUpstreamValues(t *testing.T) {
	v1 := func(body string) string { return "apiVersion: eraser.sh/v1alpha1\nkind: EraserConfig\n" + body }
	v2 := func(body string) string { return "apiVersion: eraser.sh/v1alpha2\nkind: EraserConfig\n" + body }
	v3 := func(body string) string { return "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" + body }
	noEffect := func(level string) string {
		return "manager.logLevel: \"" + level + "\" is accepted as upstream Eraser documented it; this key has no effect, as upstream: " +
			"the manager's --log-level flag (debug, info, warn, error) sets the level of the manager and its workers"
	}
	cases := map[string]struct {
		doc      string
		want     func(*Config)
		warnings []string
	}{
		// manager.logLevel: upstream documented zap's seven levels and
		// never read the key.
		"logLevel debug":     {doc: v3("manager: {logLevel: debug}"), want: func(c *Config) { c.Manager.LogLevel = "debug" }},
		"logLevel error v1":  {doc: v1("manager: {logLevel: error}"), want: func(c *Config) { c.Manager.LogLevel = "error" }},
		"logLevel empty":     {doc: v3("manager: {logLevel: ''}"), want: func(*Config) {}},
		"logLevel null":      {doc: v2("manager: {logLevel: null}"), want: func(*Config) {}},
		"logLevel dpanic":    {doc: v3("manager: {logLevel: dpanic}"), want: func(c *Config) { c.Manager.LogLevel = "dpanic" }, warnings: []string{noEffect("dpanic")}},
		"logLevel panic v2":  {doc: v2("manager: {logLevel: panic}"), want: func(c *Config) { c.Manager.LogLevel = "panic" }, warnings: []string{noEffect("panic")}},
		"logLevel fatal v1":  {doc: v1("manager: {logLevel: fatal}"), want: func(c *Config) { c.Manager.LogLevel = "fatal" }, warnings: []string{noEffect("fatal")}},
		"logLevel warn, all": {doc: v3("manager: {logLevel: warn}"), want: func(c *Config) { c.Manager.LogLevel = "warn" }},

		// components.remover.enabled: upstream had no such key and
		// removed all the same; so does this.
		"remover disabled": {
			doc:      v3("components: {remover: {enabled: false}}"),
			want:     func(*Config) {},
			warnings: []string{"components.remover.enabled: " + removerDisabledWarning},
		},
		"remover disabled v2": {
			doc:      v2("components: {remover: {enabled: false, image: {tag: v1.2.3}}}"),
			want:     func(c *Config) { c.Components.Remover.Image.Tag = "v1.2.3" },
			warnings: []string{"components.remover.enabled: " + removerDisabledWarning},
		},
		"eraser disabled v1": {
			doc:      v1("components: {eraser: {enabled: false}}"),
			want:     func(*Config) {},
			warnings: []string{"components.eraser.enabled: " + removerDisabledWarning},
		},
		"remover enabled": {doc: v3("components: {remover: {enabled: true}}"), want: func(*Config) {}},

		// Runtime addresses: upstream's runtime tests and e2e, and the
		// forms its pods mounted (the URL's path).
		"containerd default address": {
			doc:  v3("manager: {runtime: {name: containerd, address: 'unix:///run/containerd/containerd.sock'}}"),
			want: func(*Config) {},
		},
		"dockershim address": {
			doc: v3("manager: {runtime: {name: dockershim, address: 'unix:///run/dockershim.sock'}}"),
			want: func(c *Config) {
				c.Manager.Runtime, c.Manager.Retention.ImageFsPath = rt(RuntimeDockershim, "unix:///run/dockershim.sock"), "/var/lib/docker"
			},
		},
		"crio address": {
			doc: v3("manager: {runtime: {name: crio, address: 'unix:///run/crio/crio.sock'}}"),
			want: func(c *Config) {
				c.Manager.Runtime, c.Manager.Retention.ImageFsPath = rt(RuntimeCrio, "unix:///run/crio/crio.sock"), "/var/lib/containers/storage"
			},
		},
		"e2e custom socket": {
			doc:  v3("manager: {runtime: {name: containerd, address: 'unix:///fake/socket/address.sock'}}"),
			want: func(c *Config) { c.Manager.Runtime.Address = "unix:///fake/socket/address.sock" },
		},
		"one-slash unix URL": {
			doc:  v3("manager: {runtime: {name: containerd, address: 'unix:/run/k3s/containerd/containerd.sock'}}"),
			want: func(c *Config) { c.Manager.Runtime.Address = "unix:///run/k3s/containerd/containerd.sock" },
		},
		"localhost host": {
			doc:      v3("manager: {runtime: {name: containerd, address: 'unix://localhost/run/containerd/containerd.sock'}}"),
			want:     func(*Config) {},
			warnings: []string{`manager.runtime.address: the host "localhost" is ignored, as upstream Eraser ignored it: the socket is /run/containerd/containerd.sock`},
		},
		"runtime names v1": {
			doc: v1("manager: {runtime: dockershim}"),
			want: func(c *Config) {
				c.Manager.Runtime, c.Manager.Retention.ImageFsPath = rt(RuntimeDockershim, "unix:///run/dockershim.sock"), "/var/lib/docker"
			},
		},
		"runtime names v2": {
			doc: v2("manager: {runtime: crio}"),
			want: func(c *Config) {
				c.Manager.Runtime, c.Manager.Retention.ImageFsPath = rt(RuntimeCrio, "unix:///run/crio/crio.sock"), "/var/lib/containers/storage"
			},
		},

		// Upstream's keys in the versions that have them.
		"every upstream key, v1alpha1": {doc: v1(upstreamManager("runtime: containerd") + upstreamComponents("eraser")), want: upstreamWant},
		"every upstream key, v1alpha2": {doc: v2(upstreamManager("runtime: containerd") + upstreamComponents("remover")), want: upstreamWant},
		"every upstream key, v1alpha3": {
			doc: v3(upstreamManager("runtime: {name: containerd, address: 'unix:///run/containerd/containerd.sock'}\n  additionalPodLabels: {team: platform}") + upstreamComponents("remover")),
			want: func(c *Config) {
				upstreamWant(c)
				c.Manager.AdditionalPodLabels = map[string]string{"team": "platform"}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, warnings, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatalf("refused: %v\n%s", err, tc.doc)
			}
			want := defaults(got.APIVersion)
			tc.want(want)
			// The scanner's blob is the scanner's; TestScannerConfigAtLoad
			// checks what the manager makes of it.
			got.Components.Scanner.Config = ""
			got.Components.Scanner.Trivy, want.Components.Scanner.Trivy = nil, nil
			if diff := cmp.Diff(want, got, cmpQuantity, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func rt(name RuntimeName, addr string) Runtime {
	return Runtime{Name: name, Address: addr, WindowsAddress: DefaultWindowsAddress}
}

// upstreamManager sets every manager key of upstream's schema (its
// customization docs' values where they differ from the defaults).
func upstreamManager(runtime string) string {
	return "manager:\n  " + runtime + `
  otlpEndpoint: otel-collector:4318
  logLevel: info
  scheduling: {repeatInterval: 12h, beginImmediately: false}
  profile: {enabled: true, port: 6061}
  imageJob: {successRatio: 0.75, cleanup: {delayOnSuccess: 1m, delayOnFailure: 1h}}
  pullSecrets: [regcred]
  priorityClassName: low
  nodeFilter: {type: include, selectors: [pool=general]}
`
}

// upstreamComponents sets every component key of upstream's schema; the
// remover is named as the version names it.
func upstreamComponents(remover string) string {
	return `components:
  collector: {enabled: true, image: {repo: r/collector, tag: v1}, request: {mem: 25Mi, cpu: 7m}, limit: {mem: 500Mi, cpu: 0}}
  scanner:
    enabled: true
    image: {repo: r/eraser-trivy-scanner, tag: v1}
    request: {mem: 500Mi, cpu: 1000m}
    limit: {mem: 2Gi, cpu: 0}
    config: |
      cacheDir: /var/lib/trivy
    volumes: [{name: db, hostPath: {path: /var/lib/trivy-db}}]
  ` + remover + `: {image: {repo: r/remover, tag: v1}, request: {mem: 25Mi, cpu: 0}, limit: {mem: 30Mi, cpu: 0}}
`
}

func upstreamWant(c *Config) {
	m := &c.Manager
	m.OTLPEndpoint = "otel-collector:4318"
	m.Scheduling.RepeatInterval, m.Scheduling.BeginImmediately = 12*time.Hour, false
	m.Profile = Profile{Enabled: true, Port: 6061}
	m.ImageJob.SuccessRatio = 0.75
	m.ImageJob.Cleanup.DelayOnSuccess, m.ImageJob.Cleanup.DelayOnFailure = time.Minute, time.Hour
	m.PullSecrets = []string{"regcred"}
	m.PriorityClassName = "low"
	m.NodeFilter = NodeFilter{Type: FilterInclude, Selectors: []string{"pool=general"}}
	comps := &c.Components
	comps.Collector.Enabled, comps.Scanner.Enabled = true, true
	comps.Collector.Image = Image{Repo: "r/collector", Tag: "v1"}
	comps.Scanner.Image = Image{Repo: "r/eraser-trivy-scanner", Tag: "v1"}
	comps.Scanner.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/trivy-db"}}}}
	comps.Remover.Image = Image{Repo: "r/remover", Tag: "v1"}
	comps.Remover.Request.CPU = nil
	comps.Scanner.Request = Resources{Mem: q("500Mi"), CPU: q("1")}
	comps.Remover.Limit.Mem = q("30Mi")
}

// TestOwnKeyTyposRefused: the leniency above is for upstream's values;
// a misspelt key of this project's schema is still an error.
func TestOwnKeyTyposRefused(t *testing.T) {
	cases := map[string]string{
		"manager.imageJob.podStartTimout": "manager: {imageJob: {podStartTimout: 5m}}",
		"manager.scheduling.crn":          "manager: {scheduling: {crn: '0 3 * * *'}}",
		"manager.retention.minAg":         "manager: {retention: {minAg: 1h}}",
		"manager.runtime.windowsAdress":   "manager: {runtime: {name: containerd, windowsAdress: 'npipe://./pipe/x'}}",
	}
	for want, body := range cases {
		t.Run(want, func(t *testing.T) {
			_, _, err := Parse([]byte("apiVersion: eraser.sh/v1alpha3\n" + body))
			if err == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff([]string{want}, errorPaths(t, err)); diff != "" {
				t.Errorf("error paths (-want +got):\n%s", diff)
			}
			if !strings.Contains(err.Error(), "did you mean") {
				t.Errorf("no suggestion in %v", err)
			}
		})
	}
}

// TestRuntimeAddress: the forms upstream's parser accepted, decided one by
// one against what upstream's worker pods did with them.
func TestRuntimeAddress(t *testing.T) {
	type result struct{ Canonical, Warning, Err string }
	cases := map[string]struct {
		in   string
		want result
	}{
		"absolute":      {in: "unix:///run/containerd/containerd.sock", want: result{Canonical: "unix:///run/containerd/containerd.sock"}},
		"one slash":     {in: "unix:/run/crio/crio.sock", want: result{Canonical: "unix:/run/crio/crio.sock"}},
		"localhost":     {in: "unix://localhost/run/x.sock", want: result{Canonical: "unix:///run/x.sock", Warning: `the host "localhost" is ignored, as upstream Eraser ignored it: the socket is /run/x.sock`}},
		"relative path": {in: "unix://run/containerd/containerd.sock", want: result{Err: `"unix://run/containerd/containerd.sock": a unix socket's address has no host, and upstream Eraser mounted "/containerd/containerd.sock", dropping "run"; did you mean "unix:///run/containerd/containerd.sock"?`}},
		"tcp":           {in: "tcp://10.0.0.1:2375", want: result{Err: `"tcp://10.0.0.1:2375": workers dial the runtime's local unix:// socket; upstream Eraser accepted tcp:// here, but its workers could not dial it and failed on every node`}},
		// Left to endpoint.Parse, which refuses or accepts them alike.
		"named pipe": {in: "npipe://./pipe/containerd-containerd", want: result{Canonical: "npipe://./pipe/containerd-containerd"}},
		"no scheme":  {in: "/run/containerd/containerd.sock", want: result{Canonical: "/run/containerd/containerd.sock"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got result
			var err error
			got.Canonical, got.Warning, err = runtimeAddress(tc.in)
			if err != nil {
				got.Err = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
