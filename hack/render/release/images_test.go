package release

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/eraser-oss/eraser/hack/render"
	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/images"
)

// The registry and version the documented overrides are checked for, as a
// user would give them to make release.
const (
	userRegistry = "registry.example.com/team/eraser"
	userVersion  = "1.2.3"
)

// pushedRefs are the references make release REGISTRY=registry
// VERSION=version pushes for the images, sorted.
func pushedRefs(registry, version string) []string {
	var out []string
	for _, im := range Images {
		out = append(out, ImageRef(registry, im.Repo, version))
	}
	slices.Sort(out)
	return out
}

// builtFor makes this process's internal/process/version what hack/ocibuild stamps
// into a manager built with make images REGISTRY=registry VERSION=version,
// so that internal/wire/config's worker defaults are that manager's.
func builtFor(t *testing.T, registry, v string) {
	t.Helper()
	repo, ver := version.DefaultRepo, version.Version
	version.DefaultRepo, version.Version = registry, v
	t.Cleanup(func() { version.DefaultRepo, version.Version = repo, ver })
}

// installedImages are the images an install of objs runs: the manager's
// container, and the workers its EraserConfig names (the defaults of the
// manager of builtFor), sorted.
func installedImages(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, u := range objs {
		switch {
		case u.GetKind() == "Deployment":
			var dep appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dep); err != nil {
				t.Fatal(err)
			}
			for _, c := range dep.Spec.Template.Spec.Containers {
				out = append(out, c.Image)
			}
		case u.GetKind() == "ConfigMap" && u.GetName() == config.ConfigMapName:
			var cm corev1.ConfigMap
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
				t.Fatal(err)
			}
			cfg, _, err := config.Parse([]byte(cm.Data[config.ConfigKey]))
			if err != nil {
				t.Fatalf("the manager would refuse the EraserConfig: %v", err)
			}
			c := cfg.Components
			out = append(out, c.Collector.Image.Ref(), c.Scanner.Image.Ref(), c.Remover.Image.Ref())
		}
	}
	slices.Sort(out)
	return out
}

func decodeStream(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding rendered YAML: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func renderChart(t *testing.T, dir string, set []string) []*unstructured.Unstructured {
	t.Helper()
	out, err := render.Chart(dir, render.Options{Set: set, KubeVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	return decodeStream(t, out)
}

func readRepoFile(t *testing.T, parts ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{repoRoot(t)}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fencedBlocks are the bodies of the fenced code blocks of a markdown
// document in the given language.
func fencedBlocks(doc, lang string) []string {
	re := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(lang) + "\n(.*?)^```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// documentedHelmSets are the --set flags of a document's install of the
// checkout's chart from the images of make release, the first whose
// imageRegistry is registry (or the placeholder <REGISTRY>, then filled in
// with the placeholder <VERSION>): the test installs what the page tells a
// user to.
func documentedHelmSets(t *testing.T, doc, registry, v string) []string {
	t.Helper()
	fill := strings.NewReplacer("<REGISTRY>", registry, "<VERSION>", v)
	for _, block := range fencedBlocks(doc, "sh") {
		cmd := strings.ReplaceAll(block, "\\\n", " ")
		for _, line := range strings.Split(cmd, "\n") {
			if !strings.HasPrefix(line, "helm install eraser charts/eraser") {
				continue
			}
			var sets []string
			fields := strings.Fields(line)
			for i, f := range fields {
				if f == "--set" && i+1 < len(fields) {
					sets = append(sets, fill.Replace(fields[i+1]))
				}
			}
			if slices.Contains(sets, "imageRegistry="+registry) {
				return sets
			}
		}
	}
	t.Fatalf("no `helm install eraser charts/eraser ... --set imageRegistry=%s` command", registry)
	return nil
}

// documentedKustomization is docs/install.md's kustomization that points
// deploy/eraser.yaml at the images of make release, filled in.
func documentedKustomization(t *testing.T, doc, registry, v string) string {
	t.Helper()
	for _, block := range fencedBlocks(doc, "yaml") {
		if strings.Contains(block, "newName: <REGISTRY>/") {
			return strings.NewReplacer("<REGISTRY>", registry, "<VERSION>", v).Replace(block)
		}
	}
	t.Fatal("docs/install.md has no kustomization with newName: <REGISTRY>/...")
	return ""
}

func kustomize(t *testing.T, kustomization string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "eraser.yaml"), []byte(readRepoFile(t, "deploy", "eraser.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build of the documented overlay: %v\n%s", err, kustomization)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decodeStream(t, string(out))
}

// Every way to install, with what docs/install.md says to give it, runs
// exactly the images that make release pushed for the same REGISTRY and
// VERSION, and the defaults are those images at ghcr.io/eraser-oss: the
// chart's values and helpers, the manifests, internal/wire/config's defaults
// and the release's push path cannot drift apart.
func TestInstallsRunReleasedImages(t *testing.T) {
	doc := readRepoFile(t, "docs", "install.md")
	cases := map[string]struct {
		registry, version string
		objs              func(t *testing.T) []*unstructured.Unstructured
	}{
		"chart defaults": {
			registry: version.DefaultRepo, version: version.Version,
			objs: func(t *testing.T) []*unstructured.Unstructured { return renderChart(t, chartDir(t), nil) },
		},
		"static manifest": {
			registry: version.DefaultRepo, version: version.Version,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return decodeStream(t, readRepoFile(t, "deploy", "eraser.yaml"))
			},
		},
		"checkout's chart with the documented --set": {
			registry: userRegistry, version: userVersion,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return renderChart(t, chartDir(t), documentedHelmSets(t, doc, userRegistry, userVersion))
			},
		},
		"checkout's chart with the chart README's --set": {
			registry: "registry.example.com/eraser", version: "1.2.3",
			objs: func(t *testing.T) []*unstructured.Unstructured {
				readme := readRepoFile(t, "charts", "eraser", "README.md")
				return renderChart(t, chartDir(t), documentedHelmSets(t, readme, "registry.example.com/eraser", "1.2.3"))
			},
		},
		"released chart, no values": {
			registry: userRegistry, version: userVersion,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				data, err := Package(chartDir(t), Options{Registry: userRegistry, Version: userVersion, Epoch: time.Unix(0, 0)})
				if err != nil {
					t.Fatal(err)
				}
				archive := filepath.Join(t.TempDir(), "eraser-"+userVersion+".tgz")
				if err := os.WriteFile(archive, data, 0o644); err != nil {
					t.Fatal(err)
				}
				return renderChart(t, archive, nil)
			},
		},
		"static manifest with the documented kustomization": {
			registry: userRegistry, version: userVersion,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return kustomize(t, documentedKustomization(t, doc, userRegistry, userVersion))
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := tc.objs(t)
			builtFor(t, tc.registry, tc.version)
			if diff := cmp.Diff(pushedRefs(tc.registry, tc.version), installedImages(t, objs)); diff != "" {
				t.Errorf("images installed vs pushed by make release REGISTRY=%s VERSION=%s (-pushed +installed):\n%s", tc.registry, tc.version, diff)
			}
		})
	}
}

// hack/ocibuild and the release take their names from internal/wire/images;
// what else names the images is text, checked here: docs/images.md's
// table, the Makefile's image lists, the chart's default registry path.
func TestImageNamesAgree(t *testing.T) {
	want := map[string]string{} // reference without tag -> platforms
	var names []string
	for _, im := range images.All() {
		want[version.DefaultRepo+"/"+im.Repo] = strings.Join(im.Platforms, ", ")
		names = append(names, im.Name)
	}
	if diff := cmp.Diff(images.All(), Images); diff != "" {
		t.Errorf("the release's images differ from internal/wire/images:\n%s", diff)
	}

	got := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `([^`]+/[^`]+)` \\|.*\\| ([a-z0-9/, ]+) \\|$")
	for _, m := range row.FindAllStringSubmatch(readRepoFile(t, "docs", "images.md"), -1) {
		got[m[1]] = m[2]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/images.md's table (image -> platforms) (-want +got):\n%s", diff)
	}

	makefile := readRepoFile(t, "Makefile")
	lists := map[string]*regexp.Regexp{
		"IMAGES default":        regexp.MustCompile(`(?m)^IMAGES \?= (.*)$`),
		"the release's IMAGES=": regexp.MustCompile(`images IMAGES="([^"]*)"`),
	}
	for what, re := range lists {
		m := re.FindStringSubmatch(makefile)
		if m == nil {
			t.Errorf("Makefile: no %s", what)
			continue
		}
		if diff := cmp.Diff(names, strings.Fields(m[1])); diff != "" {
			t.Errorf("Makefile %s (-internal/images +Makefile):\n%s", what, diff)
		}
	}

	helpers := readRepoFile(t, "charts", "eraser", "templates", "_helpers.tpl")
	if m := regexp.MustCompile(`(?s)define "eraser.publishedRepo" -}}\s*(\S+)\s*{{-`).FindStringSubmatch(helpers); m == nil || m[1] != version.DefaultRepo {
		t.Errorf("the chart's eraser.publishedRepo is %v, want internal/process/version.DefaultRepo %s", m, version.DefaultRepo)
	}
}
