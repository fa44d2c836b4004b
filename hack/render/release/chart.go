package release

import (
	"bytes"
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
	"helm.sh/helm/v4/pkg/provenance"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/errdef"
	sigsyaml "sigs.k8s.io/yaml"
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
	pushOpts := []registry.PushOption{registry.PushOptCreationTime(o.Epoch.UTC().Format(time.RFC3339))}
	if o.HelmSigner != nil {
		prov, err := helmProvenance(o.HelmSigner, data, o.Version)
		if err != nil {
			return p, err
		}
		pushOpts = append(pushOpts, registry.PushOptProvData(prov))
	}
	res, err := client.Push(data, ref, pushOpts...)
	if err != nil {
		return p, fmt.Errorf("pushing oci://%s: %w", ref, err)
	}
	p.Digest = res.Manifest.Digest
	return p, nil
}

// helmProvenance is the chart archive's provenance file, as helm package
// --sign writes it: the chart's metadata and the archive's SHA-256, signed
// in clear with the OpenPGP key.
func helmProvenance(signer *provenance.Signatory, data []byte, version string) ([]byte, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	meta, err := sigsyaml.Marshal(ch.Metadata)
	if err != nil {
		return nil, err
	}
	prov, err := signer.ClearSign(data, ch.Metadata.Name+"-"+version+".tgz", meta)
	if err != nil {
		return nil, fmt.Errorf("signing the chart's provenance: %w", err)
	}
	return []byte(prov), nil
}

// LoadHelmSigner reads the OpenPGP secret keyring (gpg --export-secret-keys)
// and the key named (a user ID's part or a key ID), decrypted with
// passphrase when it is protected.
func LoadHelmSigner(keyring, key string, passphrase []byte) (*provenance.Signatory, error) {
	s, err := provenance.NewFromKeyring(keyring, key)
	if err != nil {
		return nil, fmt.Errorf("the chart's signing key %q in %s: %w", key, keyring, err)
	}
	if s.Entity.PrivateKey != nil && s.Entity.PrivateKey.Encrypted {
		if err := s.DecryptKey(func(string) ([]byte, error) { return passphrase, nil }); err != nil {
			return nil, fmt.Errorf("the chart's signing key %q: %w", key, err)
		}
	}
	return s, nil
}
