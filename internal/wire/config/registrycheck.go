package config

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RegistryCheck is manager.retention.registryCheck (docs/retention.md):
// before an automatic policy removes an image a workload references or a
// container used within Lookback, the remover asks the image's registry
// whether it still serves it, and keeps it if not. The zero value is the
// default, on: each unset duration or bound is the remover's default.
type RegistryCheck struct {
	// Disabled (enabled: false) turns the check off.
	Disabled bool
	// Lookback is how recent a container's use makes an image checked; 0:
	// workerdefaults.RegistryLookback.
	Lookback time.Duration
	// MaxRequests bounds a run's requests to registries on a node; 0:
	// workerdefaults.RegistryMaxRequests.
	MaxRequests int
	// Timeout bounds each request; 0: workerdefaults.RegistryTimeout.
	Timeout time.Duration
	// RemoveUnreachable (whenUnreachable: remove) removes an image whose
	// registry could not be asked; the default keeps it.
	RemoveUnreachable bool
	// CredentialsSecret names a kubernetes.io/dockerconfigjson Secret in
	// Eraser's namespace, mounted read-only into the remover; "": none.
	CredentialsSecret string
	// Mirrors are endpoints asked before a registry, by its host.
	Mirrors map[string][]string
	// PlainHTTP are registry hosts asked in plain HTTP.
	PlainHTTP []string
}

// registryCheckDoc keeps the values as written.
type registryCheckDoc struct {
	Enabled           bool                `json:"enabled"`
	Lookback          scalar              `json:"lookback"`
	MaxRequestsPerRun scalar              `json:"maxRequestsPerRun"`
	Timeout           scalar              `json:"timeout"`
	WhenUnreachable   string              `json:"whenUnreachable"`
	CredentialsSecret string              `json:"credentialsSecret"`
	Mirrors           map[string][]string `json:"mirrors"`
	PlainHTTP         []string            `json:"plainHTTP"`
}

// The registry check's bounds; its defaults are workerdefaults'.
const (
	maxRegistryRequests = 10000
	maxRegistryTimeout  = time.Minute
	maxRegistryMirrors  = 16
)

func defaultRegistryCheckDoc() registryCheckDoc { return registryCheckDoc{Enabled: true} }

func (c *converter) registryCheck(p *field.Path, d registryCheckDoc) RegistryCheck {
	out := RegistryCheck{Disabled: !d.Enabled, CredentialsSecret: d.CredentialsSecret}
	if d.Lookback != "" {
		out.Lookback = c.duration(p.Child("lookback"), d.Lookback, true)
	}
	if d.Timeout != "" {
		out.Timeout = c.duration(p.Child("timeout"), d.Timeout, true)
		if out.Timeout > maxRegistryTimeout {
			c.errs = append(c.errs, field.Invalid(p.Child("timeout"), string(d.Timeout), fmt.Sprintf("must be at most %v: each request holds up the node's removals", maxRegistryTimeout)))
		}
	}
	if d.MaxRequestsPerRun != "" {
		n, err := strconv.Atoi(string(d.MaxRequestsPerRun))
		if err != nil || n < 1 || n > maxRegistryRequests {
			c.errs = append(c.errs, field.Invalid(p.Child("maxRequestsPerRun"), string(d.MaxRequestsPerRun), fmt.Sprintf("must be a whole number between 1 and %d", maxRegistryRequests)))
		}
		out.MaxRequests = n
	}
	switch d.WhenUnreachable {
	case "", "keep":
	case "remove":
		out.RemoveUnreachable = true
	default:
		c.errs = append(c.errs, field.NotSupported(p.Child("whenUnreachable"), d.WhenUnreachable, []string{"keep", "remove"}))
	}
	if s := d.CredentialsSecret; s != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s) {
			c.errs = append(c.errs, field.Invalid(p.Child("credentialsSecret"), s, msg))
		}
	}
	hosts := make([]string, 0, len(d.Mirrors))
	for h := range d.Mirrors {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		hp := p.Child("mirrors").Key(h)
		if msg := registryHost(h); msg != "" {
			c.errs = append(c.errs, field.Invalid(hp, h, msg))
			continue
		}
		eps := d.Mirrors[h]
		if len(eps) == 0 || len(eps) > maxRegistryMirrors {
			c.errs = append(c.errs, field.Invalid(hp, len(eps), fmt.Sprintf("must list 1 to %d endpoints", maxRegistryMirrors)))
			continue
		}
		for i, e := range eps {
			if msg := mirrorEndpoint(e); msg != "" {
				c.errs = append(c.errs, field.Invalid(hp.Index(i), e, msg))
			}
		}
		if out.Mirrors == nil {
			out.Mirrors = map[string][]string{}
		}
		out.Mirrors[h] = slices.Clone(eps)
	}
	for i, h := range d.PlainHTTP {
		if msg := registryHost(h); msg != "" {
			c.errs = append(c.errs, field.Invalid(p.Child("plainHTTP").Index(i), h, msg))
			continue
		}
		out.PlainHTTP = append(out.PlainHTTP, h)
	}
	if !d.Enabled && (d.CredentialsSecret != "" || len(d.Mirrors) > 0 || len(d.PlainHTTP) > 0) {
		c.warn(p.Child("enabled"), "is false: credentialsSecret, mirrors and plainHTTP have no effect")
	}
	return out
}

// registryHost says what is wrong with a registry host as images name it
// (host[:port], no scheme, no path), or "".
func registryHost(h string) string {
	if h == "" || strings.ContainsAny(h, "/ \t,=@") || strings.Contains(h, "://") {
		return "must be a registry host as images name it, such as docker.io or registry.example.com:5000"
	}
	u, err := url.Parse("https://" + h)
	if err != nil || u.Host != h {
		return "must be a registry host as images name it, such as docker.io or registry.example.com:5000"
	}
	return ""
}

// mirrorEndpoint says what is wrong with a mirror endpoint: a host (asked
// in https, or http when plainHTTP lists it) or an http(s) URL.
func mirrorEndpoint(e string) string {
	if !strings.Contains(e, "://") {
		return registryHost(e)
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(e, " ,") {
		return "must be a host[:port] or an http(s) URL such as https://mirror.example.com"
	}
	return ""
}
