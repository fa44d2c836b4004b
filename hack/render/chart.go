// Package render renders the Eraser Helm chart exactly as `helm template
// --include-crds` does, through the Helm SDK: the tests check what a Helm
// install would create, and the cmd/chart command gives the same YAML to
// environments without a helm binary.
package render

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// Defaults of Options, as the docs install the chart.
const (
	DefaultRelease   = "eraser"
	DefaultNamespace = "eraser-system"
)

// Options are what `helm template` takes from its command line.
type Options struct {
	Release   string
	Namespace string
	// ValuesFiles are applied in order, then Set (key=value, as --set).
	ValuesFiles []string
	Set         []string
	// KubeVersion is the cluster version the chart is checked against (its
	// kubeVersion) and renders for, as --kube-version; empty, Helm's
	// default, the minor its client-go stands for.
	KubeVersion string
	// Version is the chart version to pull when the chart is an oci://
	// reference, as helm install's --version; required there.
	Version string
	// ReuseValues renders as `helm upgrade --reuse-values` does: the
	// chart's own defaults are replaced by these, the previous release's
	// values, before ValuesFiles and Set apply.
	ReuseValues map[string]any
	// PlainHTTP pulls an oci:// chart over plain HTTP, which only a
	// registry on this machine (127.0.0.0/8, localhost, [::1]) may be
	// reached by; the kubelet tier installs from one.
	PlainHTTP bool
}

// Chart renders the chart in dir, a directory or archive, or an
// oci://REGISTRY/PATH reference pulled at o.Version with Helm's registry
// client (as helm install oci://... --version does): the templates (the
// CRDs among them, first) in Helm's install order, as one multi-document
// YAML stream, without helm test's hooks. With no cluster to look up, every
// CRD is rendered, as in a first install.
func Chart(dir string, o Options) (string, error) {
	if o.Release == "" {
		o.Release = DefaultRelease
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	chrt, err := loadChart(dir, o)
	if err != nil {
		return "", err
	}
	if o.ReuseValues != nil {
		c, ok := chrt.(*chartv2.Chart)
		if !ok {
			return "", fmt.Errorf("chart %s: unexpected chart type %T", dir, chrt)
		}
		c.Values = o.ReuseValues
	}
	vals, err := (&values.Options{ValueFiles: o.ValuesFiles, Values: o.Set}).MergeValues(getter.Providers{})
	if err != nil {
		return "", fmt.Errorf("reading values: %w", err)
	}

	// Helm logs coalescing notes (a value of the wrong shape, say) at debug
	// level; those are for a person, not for the rendered output.
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = o.Release
	install.Namespace = o.Namespace
	install.IncludeCRDs = true
	install.Replace = true // no release storage to check the name against
	if o.KubeVersion != "" {
		install.KubeVersion, err = common.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return "", fmt.Errorf("kube version %q: %w", o.KubeVersion, err)
		}
	}
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s: %w", dir, err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return "", fmt.Errorf("rendering chart %s: unexpected release type %T", dir, rel)
	}
	var b strings.Builder
	b.WriteString(strings.TrimSpace(r.Manifest))
	b.WriteString("\n")
	for _, h := range r.Hooks {
		if slices.Contains(h.Events, releasev1.HookTest) {
			// helm test's, which an install never creates (helm template
			// --skip-tests).
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return b.String(), nil
}

// loadChart loads a chart from disk or, for an oci:// reference, from its
// registry: the archive at tag o.Version, pulled into memory (no cache).
func loadChart(src string, o Options) (chart.Charter, error) {
	ref, isOCI := strings.CutPrefix(src, "oci://")
	if !isOCI {
		if o.PlainHTTP || o.Version != "" {
			return nil, fmt.Errorf("chart %s: a version and plain HTTP apply only to an oci:// chart", src)
		}
		chrt, err := loader.Load(src)
		if err != nil {
			return nil, fmt.Errorf("loading chart %s: %w", src, err)
		}
		return chrt, nil
	}
	if o.Version == "" {
		return nil, fmt.Errorf("chart %s: give its version (--version)", src)
	}
	if strings.ContainsAny(ref, "@") || strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return nil, fmt.Errorf("chart %s: give the repository without a tag or digest, and the version with --version", src)
	}
	host, _, _ := strings.Cut(ref, "/")
	var opts []registry.ClientOption
	if o.PlainHTTP {
		if !endpoint.IsLoopbackHost(host) {
			return nil, fmt.Errorf("chart %s: plain HTTP only to a registry on this machine (127.0.0.0/8, localhost, [::1])", src)
		}
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	res, err := client.Pull(ref+":"+o.Version, registry.PullOptWithChart(true))
	if err != nil {
		return nil, fmt.Errorf("pulling chart %s version %s: %w", src, o.Version, err)
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		return nil, fmt.Errorf("loading chart %s version %s: %w", src, o.Version, err)
	}
	return chrt, nil
}
