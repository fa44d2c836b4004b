package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/hack/render"
)

// packagedChart is the chart as make release REGISTRY=userRegistry
// VERSION=userVersion packages it, as an archive helm installs.
func packagedChart(t *testing.T) string {
	t.Helper()
	data, err := Package(chartDir(t), Options{Registry: userRegistry, Version: userVersion, Epoch: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "eraser-"+userVersion+".tgz")
	if err := os.WriteFile(archive, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return archive
}

// imageRegistry on a released chart pulls every image the install runs
// from the mirror: the manager, and the three workers its EraserConfig
// names, whatever registry path the release was pushed to; a worker set to
// a repository outside both is not moved silently, the render fails naming
// the value.
func TestImageRegistryMovesEveryImage(t *testing.T) {
	const mirror = "mirror.internal/eraser"
	for name, chart := range map[string]func(t *testing.T) string{
		"released chart": packagedChart,
		"checkout's chart": func(t *testing.T) string {
			return chartDir(t)
		},
	} {
		t.Run(name, func(t *testing.T) {
			set := []string{"imageRegistry=" + mirror}
			if name == "checkout's chart" {
				set = append(set, "deploy.image.tag="+userVersion)
			}
			objs := renderChart(t, chart(t), set)
			// The manager a release runs was built for the release's
			// registry path: the workers it defaults to are there.
			builtFor(t, userRegistry, userVersion)
			if diff := cmp.Diff(pushedRefs(mirror, userVersion), installedImages(t, objs)); diff != "" {
				t.Errorf("images installed with imageRegistry=%s vs the release's under it (-want +installed):\n%s", mirror, diff)
			}

			// Set under the release's registry path (as an older release's
			// values had it), a repository moves too.
			if name == "released chart" {
				objs = renderChart(t, chart(t), append(set, "runtimeConfig.components.collector.image.repo="+userRegistry+"/collector"))
				if diff := cmp.Diff(pushedRefs(mirror, userVersion), installedImages(t, objs)); diff != "" {
					t.Errorf("a worker set under the release's registry path, with imageRegistry (-want +installed):\n%s", diff)
				}
			}

			_, err := render.Chart(chart(t), render.Options{KubeVersion: "v1.37.2",
				Set: append(set, "runtimeConfig.components.collector.image.repo=other.example/collector")})
			if err == nil || !strings.Contains(err.Error(), "runtimeConfig.components.collector.image.repo") || !strings.Contains(err.Error(), "other.example/collector") {
				t.Errorf("a worker outside the release's registry path, with imageRegistry: error %v, want one naming runtimeConfig.components.collector.image.repo and its value", err)
			}
		})
	}
}
