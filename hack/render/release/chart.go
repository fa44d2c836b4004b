package release

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/errdef"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/eraser-oss/eraser/internal/wire/images"
)

// ImageRef is the reference a release gives an image of Images.
func ImageRef(registry, repo, version string) string {
	return registry + "/" + repo + ":" + version
}

// ChartRef is where a release puts the chart, without the oci:// scheme.
func ChartRef(registry, version string) string {
	return registry + "/" + ChartRepo + ":" + version
}

// Package loads the chart in dir and returns it as Helm packages it
// (helm package), stamped for the release: version and appVersion are
// o.Version, the manager's and the collector's and scanner's images are
// the release's, every timestamp is o.Epoch.
//
// The remover's image is left to the manager's default, which a manager
// built for this registry ("make images REGISTRY=...") names: a
// components.remover key in the chart's defaults would break values files
// written for EraserConfig v1alpha1, which call it components.eraser.
func Package(dir string, o Options) ([]byte, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	ch.Metadata.Version = o.Version
	ch.Metadata.AppVersion = o.Version
	if err := stampValues(ch, o.Registry, o.Version); err != nil {
		return nil, err
	}
	ch.StampModTimes(o.Epoch)
	tmp, err := os.MkdirTemp("", "eraser-chart")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	file, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, fmt.Errorf("packaging chart %s: %w", dir, err)
	}
	return os.ReadFile(file)
}

// valueImages are the chart values that name an image, and its repository
// under the registry.
var valueImages = []struct {
	path []string
	repo string
}{
	{[]string{"deploy", "image"}, images.Manager.Repo},
	{[]string{"runtimeConfig", "components", "collector", "image"}, images.Collector.Repo},
	{[]string{"runtimeConfig", "components", "scanner", "image"}, images.Scanner.Repo},
}

// stampValues rewrites the chart's values.yaml in place, keeping its
// comments, so that the packaged chart's defaults name the release's
// images.
func stampValues(ch *chart.Chart, registry, version string) error {
	var raw *common.File
	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			raw = f
		}
	}
	if raw == nil {
		return errors.New("the chart has no values.yaml")
	}
	doc, err := yaml.Parse(string(raw.Data))
	if err != nil {
		return fmt.Errorf("chart values.yaml: %w", err)
	}
	str := func(s string) *yaml.RNode {
		n := yaml.NewStringRNode(s)
		n.YNode().Style = yaml.DoubleQuotedStyle
		return n
	}
	for _, vi := range valueImages {
		img, err := doc.Pipe(yaml.LookupCreate(yaml.MappingNode, vi.path...))
		if err != nil {
			return fmt.Errorf("chart values.yaml %v: %w", vi.path, err)
		}
		if err := img.PipeE(yaml.SetField("repo", str(registry+"/"+vi.repo))); err != nil {
			return err
		}
		if err := img.PipeE(yaml.SetField("tag", str(version))); err != nil {
			return err
		}
	}
	out, err := doc.String()
	if err != nil {
		return err
	}
	head := fmt.Sprintf("# Release %s: images from %s (the remover's too: the manager defaults to it).\n", version, registry)
	raw.Data = []byte(head + out)
	vals, err := common.ReadValues(raw.Data)
	if err != nil {
		return fmt.Errorf("stamped values.yaml: %w", err)
	}
	ch.Values = vals
	return nil
}

// helmClient is Helm's registry client with the release's credentials
// (Helm's registry config, then the docker config) and transport rule.
func helmClient(o Options) (*registry.Client, error) {
	opts := []registry.ClientOption{
		registry.ClientOptHTTPClient(&http.Client{Transport: loopbackOnlyHTTP{registry.NewTransport(false)}}),
	}
	if o.HelmRegistryConfig != "" {
		opts = append(opts, registry.ClientOptCredentialsFile(o.HelmRegistryConfig))
	}
	if o.Insecure {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	return registry.NewClient(opts...)
}

// pushChart pushes the packaged chart unless its reference already holds
// the same archive.
func pushChart(o Options, data []byte) (Pushed, error) {
	client, err := helmClient(o)
	if err != nil {
		return Pushed{}, err
	}
	ref := ChartRef(o.Registry, o.Version)
	p := Pushed{Ref: ref}
	sum := fmt.Sprintf("sha256:%x", sha256.Sum256(data))
	if desc, err := client.Resolve(ref); err == nil {
		got, err := client.Pull(ref, registry.PullOptWithChart(true))
		if err != nil {
			return p, fmt.Errorf("pulling oci://%s to compare: %w", ref, err)
		}
		if got.Chart.Digest == sum {
			p.Digest, p.Unchanged = desc.Digest.String(), true
			return p, nil
		}
		if !o.Overwrite {
			return p, fmt.Errorf("oci://%s already holds a chart archive %s, not this release's %s: a published version does not change (bump VERSION, or -overwrite)", ref, got.Chart.Digest, sum)
		}
	} else if !errors.Is(err, errdef.ErrNotFound) {
		return p, fmt.Errorf("looking up oci://%s: %w", ref, err)
	}
	res, err := client.Push(data, ref, registry.PushOptCreationTime(o.Epoch.UTC().Format(time.RFC3339)))
	if err != nil {
		return p, fmt.Errorf("pushing oci://%s: %w", ref, err)
	}
	p.Digest = res.Manifest.Digest
	return p, nil
}
