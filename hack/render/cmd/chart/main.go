// Command chart renders the Eraser Helm chart to YAML as `helm template
// --include-crds` would, for clusters and tests without a helm binary:
//
//	go -C hack/render run ./cmd/chart [-f values.yaml]... [--set k=v]... \
//	    [--namespace eraser-system] [--name eraser] $PWD/charts/eraser | kubectl apply --server-side -f -
//
// or from a registry, as helm install oci://... does (make release pushes
// the chart there; --plain-http only to a registry on this machine):
//
//	go -C hack/render run ./cmd/chart --version 1.2.3 oci://ghcr.io/<owner>/eraser/charts/eraser
//
// The namespace is not created (nor is it by helm template): create it
// first, with the Pod Security labels docs/install.md gives.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eraser-oss/eraser/hack/render"
)

type list []string

func (l *list) String() string     { return fmt.Sprint(*l) }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var o render.Options
	var files, set list
	flag.Var(&files, "f", "values file (repeatable)")
	flag.Var(&set, "set", "key=value, as helm's --set (repeatable)")
	flag.StringVar(&o.Namespace, "namespace", render.DefaultNamespace, "namespace of the release")
	flag.StringVar(&o.Release, "name", render.DefaultRelease, "release name")
	flag.StringVar(&o.KubeVersion, "kube-version", "", "Kubernetes version to render for (default: the one this build's client-go stands for)")
	flag.StringVar(&o.Version, "version", "", "chart version, for an oci:// chart (required there)")
	flag.BoolVar(&o.PlainHTTP, "plain-http", false, "pull an oci:// chart over plain HTTP: only from a registry on this machine (127.0.0.0/8, localhost, [::1])")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: chart [flags] CHART_DIR|oci://REGISTRY/PATH/eraser")
		flag.PrintDefaults()
		os.Exit(2)
	}
	o.ValuesFiles, o.Set = files, set
	out, err := render.Chart(flag.Arg(0), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}
