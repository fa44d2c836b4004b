// The chart's Artifact Hub metadata: the annotations Artifact Hub reads
// from Chart.yaml (https://artifacthub.io/docs/topics/annotations/helm/).

package release

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"
)

// Artifact Hub's annotations.
const (
	ahImages                  = "artifacthub.io/images"
	ahLicense                 = "artifacthub.io/license"
	ahLinks                   = "artifacthub.io/links"
	ahPrerelease              = "artifacthub.io/prerelease"
	ahContainsSecurityUpdates = "artifacthub.io/containsSecurityUpdates"
	ahOperator                = "artifacthub.io/operator"
)

// ahImage is one entry of artifacthub.io/images.
type ahImage struct {
	Name      string   `json:"name"`
	Image     string   `json:"image"`
	Platforms []string `json:"platforms,omitempty"`
}

type ahLink struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// annotate sets the chart's Artifact Hub annotations: the release's images
// by tag and digest (what its values pin), the license, the links, whether
// it is a prerelease. Security updates are not claimed: a release says so
// in its notes, not by default.
func annotate(ch *chart.Chart, o Options) error {
	var imgs []ahImage
	for _, im := range Images {
		plats, err := imagePlatforms(im, o.Platforms)
		if err != nil {
			return err
		}
		dig := o.Digests[im.Repo]
		if dig == "" {
			return fmt.Errorf("no digest for image %s", im.Repo)
		}
		imgs = append(imgs, ahImage{Name: im.Repo, Image: ImageRef(o.Registry, im.Repo, o.Version) + "@" + dig, Platforms: plats})
	}
	images, err := yaml.Marshal(imgs)
	if err != nil {
		return err
	}
	source := ch.Metadata.Home
	if len(ch.Metadata.Sources) > 0 {
		source = ch.Metadata.Sources[0]
	}
	links, err := yaml.Marshal([]ahLink{
		{Name: "source", URL: source},
		{Name: "documentation", URL: strings.TrimSuffix(source, "/") + "/tree/v" + o.Version + "/docs"},
		{Name: "verifying the release", URL: strings.TrimSuffix(source, "/") + "/blob/v" + o.Version + "/docs/release.md#verifying-a-release"},
	})
	if err != nil {
		return err
	}
	sv, err := semver.StrictNewVersion(o.Version)
	if err != nil {
		return err
	}
	if ch.Metadata.Annotations == nil {
		ch.Metadata.Annotations = map[string]string{}
	}
	a := ch.Metadata.Annotations
	a[ahImages] = string(images)
	a[ahLicense] = "Apache-2.0"
	a[ahLinks] = string(links)
	a[ahPrerelease] = fmt.Sprint(sv.Prerelease() != "")
	a[ahContainsSecurityUpdates] = "false"
	a[ahOperator] = "true"
	return nil
}
