// Command release publishes an Eraser release: the images "make images"
// wrote (one multi-platform index each) and the Helm chart, stamped with
// the version, to an OCI registry. "make release" builds the images and
// runs it; docs/release.md describes both. With -cli-out it also builds
// the commands (cmd/eraser, cmd/kubectl-eraser) and pushes them, with
// SHA256SUMS.
//
//	go -C hack/render run ./cmd/release -registry ghcr.io/owner/eraser -version 1.2.3 \
//	    -images $PWD/bin/images -chart $PWD/charts/eraser
//
// With -cosign-key it signs them as cosign does, and attests each image's
// SBOM and build provenance.
//
// Credentials: the docker config for the images (docker login), Helm's
// registry config then the docker config for the chart.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"helm.sh/helm/v4/pkg/cli"

	"github.com/eraser-oss/eraser/hack/render/release"
	"github.com/eraser-oss/eraser/internal/process/version"
)

func main() {
	var o release.Options
	flag.StringVar(&o.Registry, "registry", "", "registry host and path the images and chart go under, e.g. ghcr.io/owner/eraser")
	flag.StringVar(&o.Version, "version", "", "the release, a semantic version without the leading v (image tag, chart version and appVersion)")
	flag.StringVar(&o.ImagesDir, "images", "bin/images", "directory of the OCI layouts make images wrote")
	flag.StringVar(&o.ChartDir, "chart", "charts/eraser", "the chart's directory")
	flag.BoolVar(&o.Insecure, "insecure", false, "plain HTTP; only for a registry on this machine (127.0.0.0/8, localhost, [::1])")
	flag.BoolVar(&o.Overwrite, "overwrite", false, "replace tags that hold other content (a published version should not change)")
	flag.StringVar(&o.HelmRegistryConfig, "registry-config", cli.New().RegistryConfig, "Helm's registry credentials file (helm registry login; $HELM_REGISTRY_CONFIG)")
	platforms := flag.String("platforms", "", "release only these platforms of each image, space- or comma-separated (e.g. linux/amd64): for tests and local use; default every platform")
	key := flag.String("cosign-key", "", "sign the release with this cosign private key (cosign generate-key-pair; its password in $COSIGN_PASSWORD): signatures, SBOMs and provenance that cosign verify and cosign verify-attestation check; required unless the registry is on this machine")
	helmKeyring := flag.String("helm-keyring", "", "also sign the chart as helm package --sign does, with a key of this OpenPGP secret keyring (gpg --export-secret-keys; its passphrase in $HELM_KEY_PASSPHRASE): a provenance file pushed with the chart, which helm pull --verify checks")
	helmKey := flag.String("helm-key", "", "the key of -helm-keyring to sign with: part of its user ID, or its key ID")
	flag.StringVar(&o.BuilderID, "builder-id", release.DefaultBuilderID, "the builder the images' provenance names (e.g. the CI run's URL)")
	check := flag.Bool("check", false, "only check the registry, version and -insecure; push nothing")
	var cli release.CLI
	flag.StringVar(&cli.Out, "cli-out", "", "build the commands (eraser, kubectl-eraser) for the release's platforms into this directory, with SHA256SUMS, and push it as REGISTRY/"+release.CLIRepo+":VERSION; empty: leave it out")
	flag.StringVar(&cli.Source, "source", ".", "the repository root, where ./cmd/eraser and ./cmd/kubectl-eraser are built (with -cli-out)")
	flag.StringVar(&cli.Commit, "commit", "", "source revision stamped into the commands (with -cli-out)")
	flag.StringVar(&cli.Tags, "tags", "", "go build -tags of the commands (with -cli-out)")
	flag.StringVar(&cli.LDFlags, "ldflags", "", "go build -ldflags of the commands, before the version stamps (with -cli-out)")
	flag.StringVar(&cli.KrewURIBase, "krew-uri-base", release.DefaultKrewURIBase, "where the kubectl plugin's archives are downloaded from, as its krew manifest names them; VERSION stands for the release's (with -cli-out)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: release -registry REGISTRY -version VERSION [flags]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	o.Platforms = strings.FieldsFunc(*platforms, func(r rune) bool { return r == ' ' || r == ',' })
	if cli.Out != "" {
		o.CLI = &cli
	}
	if *key != "" {
		signer, err := release.LoadSigner(*key, []byte(os.Getenv("COSIGN_PASSWORD")))
		if err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		o.Signer = signer
	}
	if *helmKeyring != "" {
		signer, err := release.LoadHelmSigner(*helmKeyring, *helmKey, []byte(os.Getenv("HELM_KEY_PASSPHRASE")))
		if err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		o.HelmSigner = signer
	}
	if err := run(o, *check); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(o release.Options, check bool) error {
	if check {
		return release.Check(o)
	}
	epoch, err := version.SourceDateEpoch()
	if err != nil {
		return err
	}
	o.Epoch = epoch
	o.Out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	_, err = release.Run(ctx, o)
	return err
}
