// Package render renders the Eraser Helm chart exactly as `helm template
// --include-crds` does, through the Helm SDK: the tests check what a Helm
// install would create, and the cmd/chart command gives the same YAML to
// environments without a helm binary.
package render

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
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
}

// Chart renders the chart in dir: the CRDs from crds/ first, then the
// templates in Helm's install order, as one multi-document YAML stream.
func Chart(dir string, o Options) (string, error) {
	if o.Release == "" {
		o.Release = DefaultRelease
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", dir, err)
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
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return b.String(), nil
}
