package release

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/errdef"
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
// o.Version, files/release.yaml names the registry path the images were
// pushed to and their digests (o.Digests), Chart.yaml carries Artifact
// Hub's annotations, every timestamp is o.Epoch.
//
// values.yaml is left as it is: its images name no tag (the chart's
// appVersion is the default) and the default repository, which the chart
// reads as under the release's registry path. A value written there would
// outlive the release: `helm upgrade --reuse-values` keeps the previous
// release's values.yaml, and with them its images.
func Package(dir string, o Options) ([]byte, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	ch.Metadata.Version = o.Version
	ch.Metadata.AppVersion = o.Version
	ch.Files = append(ch.Files, &common.File{Name: ReleaseFile, ModTime: o.Epoch, Data: releaseFile(o)})
	if len(o.Digests) > 0 {
		if err := annotate(ch, o); err != nil {
			return nil, err
		}
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

// ReleaseFile is where a released chart says what it was packaged for
// (the chart's eraser.release reads it); a chart in a checkout has none.
const ReleaseFile = "files/release.yaml"

// releaseFile is ReleaseFile's content: the registry path of the release's
// images, which the manager was built to default its workers to, and their
// digests by repository name, which the chart pulls them by (the file is
// the chart's own, so no value carried from another release pins them).
func releaseFile(o Options) []byte {
	out := fmt.Sprintf("# Release %s: its images are under this registry path, at tag %s.\nregistry: %q\n", o.Version, o.Version, o.Registry)
	if len(o.Digests) > 0 {
		out += "# Each image by digest, exactly what the release pushed and signed.\ndigests:\n"
		for _, repo := range slices.Sorted(maps.Keys(o.Digests)) {
			out += fmt.Sprintf("  %s: %q\n", repo, o.Digests[repo])
		}
	}
	return []byte(out)
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
