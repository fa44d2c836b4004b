package helmtier

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	released "github.com/eraser-oss/eraser/hack/render/release"
	"github.com/eraser-oss/eraser/internal/manager/releasecheck"
	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

const releaseRegistry = "registry.example/eraser"

// releasedChart is the chart as `make release REGISTRY=releaseRegistry
// VERSION=v` packages it, as a file helm installs.
func releasedChart(t *testing.T, v string) string {
	t.Helper()
	data, err := released.Package(ourChart(), released.Options{Registry: releaseRegistry, Version: v, Epoch: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "eraser-"+v+".tgz")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The documented upgrade, `helm upgrade --reuse-values` from one release's
// chart to the next, moves every image to the next release: the manager,
// and the collector, scanner and remover it starts. A tag the user pinned
// stays (Helm reuses it), the NOTES say so, and unsetting it moves it.
func TestUpgradeReuseValuesMovesEveryImage(t *testing.T) {
	eachHelm(t, func(t *testing.T, c *cluster) {
		old, next := releasedChart(t, "1.2.3"), releasedChart(t, "1.2.4")
		c.createNamespace()
		c.helm("install", release, old, "-n", namespace)
		c.waitEstablished()
		c.runsRelease(releaseRegistry, "1.2.3")
		out := c.helm("upgrade", release, next, "-n", namespace, "--reuse-values")
		c.runsRelease(releaseRegistry, "1.2.4")
		if !strings.Contains(out, "Eraser 1.2.4 ") || strings.Contains(out, "pin images") {
			t.Errorf("the NOTES do not say plainly that 1.2.4 runs:\n%s", out)
		}

		// A mirror set at install moves with the release too.
		c.helm("upgrade", release, old, "-n", namespace, "--reuse-values", "--set", "imageRegistry=mirror.example/eraser")
		c.runsRelease("mirror.example/eraser", "1.2.3")
		c.helm("upgrade", release, next, "-n", namespace, "--reuse-values")
		c.runsRelease("mirror.example/eraser", "1.2.4")

		// Pinned by the user: kept, and said.
		c.helm("upgrade", release, old, "-n", namespace, "--reuse-values", "--set", "deploy.image.tag=1.2.3")
		out = c.helm("upgrade", release, next, "-n", namespace, "--reuse-values")
		if !strings.Contains(out, "- deploy.image.tag=1.2.3") {
			t.Errorf("the NOTES do not name the pinned deploy.image.tag:\n%s", out)
		}
		if got := c.managerImage(); got != "mirror.example/eraser/eraser-manager:1.2.3" {
			t.Errorf("a pinned tag: manager image %s, want it kept at 1.2.3", got)
		}
		c.helm("upgrade", release, next, "-n", namespace, "--reuse-values", "--set", "deploy.image.tag=")
		c.runsRelease("mirror.example/eraser", "1.2.4")
	})
}

// managerImage is the image of the manager's Deployment.
func (c *cluster) managerImage() string {
	c.t.Helper()
	d := &appsv1.Deployment{}
	if err := c.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: releasecheck.DeploymentName}, d); err != nil {
		c.t.Fatal(err)
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name == releasecheck.ManagerContainer {
			return ctr.Image
		}
	}
	c.t.Fatalf("Deployment %s has no container %s", releasecheck.DeploymentName, releasecheck.ManagerContainer)
	return ""
}

// runsRelease checks that the release runs every image from registry at
// version v: the manager's Deployment, and the workers as that manager
// reads its EraserConfig (a worker the document leaves out is the
// manager's default, its own registry path and version; the release's
// manager is built for releaseRegistry).
func (c *cluster) runsRelease(registry, v string) {
	c.t.Helper()
	if got, want := c.managerImage(), released.ImageRef(registry, "eraser-manager", v); got != want {
		c.t.Errorf("manager image %s, want %s", got, want)
	}
	cm := &corev1.ConfigMap{}
	if err := c.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: config.ConfigMapName}, cm); err != nil {
		c.t.Fatal(err)
	}
	repo, ver := version.DefaultRepo, version.Version
	version.DefaultRepo, version.Version = releaseRegistry, v
	defer func() { version.DefaultRepo, version.Version = repo, ver }()
	cfg, _, err := config.Parse([]byte(cm.Data[config.ConfigKey]))
	if err != nil {
		c.t.Fatal(err)
	}
	for name, got := range map[string]config.Image{
		"collector":            cfg.Components.Collector.Image,
		"eraser-trivy-scanner": cfg.Components.Scanner.Image,
		"remover":              cfg.Components.Remover.Image,
	} {
		if want := released.ImageRef(registry, name, v); got.Ref() != want {
			c.t.Errorf("%s image %s, want %s", name, got.Ref(), want)
		}
	}
}
