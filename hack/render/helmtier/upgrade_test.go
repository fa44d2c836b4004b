package helmtier

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// A release of upstream's chart (CRDs as plain templates) upgraded in place
// to ours keeps both CRDs and every ImageList and ImageJob, now served with
// our schema, and our manager reconciles them. Helm deletes what the old
// release had and the new one lacks: with the CRDs in crds/, this upgrade
// deleted them and every object with them.
func TestUpgradeFromUpstreamShapedRelease(t *testing.T) {
	eachHelm(t, func(t *testing.T, c *cluster) { upgradeFromUpstream(c, upstreamShapedChart()) })
}

// The same from upstream's own released chart, where the reference data
// beside the repository has it.
func TestUpgradeFromUpstreamChart(t *testing.T) {
	dir := upstreamChartDir()
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		t.Skipf("upstream's chart v1.4.1 is not at %s; TestUpgradeFromUpstreamShapedRelease ran the project's fixture instead", dir)
	}
	eachHelm(t, func(t *testing.T, c *cluster) { upgradeFromUpstream(c, dir) })
}

// releaseImages are the overrides docs/install.md gives for installing
// from this checkout the images of `make release REGISTRY VERSION`.
var releaseImages = []string{"--set", "imageRegistry=registry.example/eraser", "--set", "deploy.image.tag=1.2.3"}

func upgradeFromUpstream(c *cluster, upstream string) {
	c.createNamespace()
	c.helm("install", release, upstream, "-n", namespace)
	c.waitEstablished()
	c.createUserObjects()

	c.helm(append([]string{"upgrade", release, ourChart(), "-n", namespace}, releaseImages...)...)
	c.userObjectsKept("after helm upgrade")
	c.servesOurCRDs()
	// Created before the install, under a name upstream ignored: taken
	// over, not run.
	c.managerTakesOver("migrate-v1", eraserv1.ReasonNotRunOnAdoption)
}

// Ours to ours: a change to a CRD's schema in the chart reaches the cluster
// on helm upgrade (Helm never upgrades crds/).
func TestUpgradeAppliesCRDChange(t *testing.T) {
	eachHelm(t, upgradeAppliesCRDChange)
}

func upgradeAppliesCRDChange(t *testing.T, c *cluster) {
	c.createNamespace()
	old := chartWithoutField(t, "report")
	c.helm("install", release, old, "-n", namespace)
	c.waitEstablished()
	if c.hasStatusField("report") {
		t.Fatal("the old chart's CRD already has status.report: the fixture did not remove it")
	}
	c.helm("upgrade", release, ourChart(), "-n", namespace)
	if !c.hasStatusField("report") {
		t.Fatal("after helm upgrade the ImageJob CRD lacks status.report: the chart's CRD change did not reach the cluster")
	}
	c.servesOurCRDs()
}

// helm uninstall keeps the CRDs and every object by default; crds.keep=false
// removes them.
func TestUninstall(t *testing.T) {
	t.Run("keeps CRDs and objects", func(t *testing.T) {
		eachHelm(t, uninstallKeeps)
	})
	t.Run("crds.keep=false removes them", func(t *testing.T) {
		eachHelm(t, uninstallRemoves)
	})
}

func uninstallKeeps(t *testing.T, c *cluster) {
	c.createNamespace()
	c.helm("install", release, ourChart(), "-n", namespace)
	c.waitEstablished()
	c.createUserObjects()
	out := c.helm("uninstall", release, "-n", namespace)
	for _, crd := range []string{imageListsCRD, imageJobsCRD} {
		if !strings.Contains(out, crd) {
			t.Errorf("helm uninstall did not say that it kept %s:\n%s", crd, out)
		}
	}
	c.userObjectsKept("after helm uninstall")
	// And installing again takes the kept CRDs back.
	c.helm("install", release, ourChart(), "-n", namespace)
	c.userObjectsKept("after installing again")
	c.servesOurCRDs()
}

func uninstallRemoves(t *testing.T, c *cluster) {
	c.createNamespace()
	c.helm("install", release, ourChart(), "-n", namespace, "--set", "crds.keep=false")
	c.waitEstablished()
	c.helm("uninstall", release, "-n", namespace, "--wait")
	for _, crd := range []string{imageListsCRD, imageJobsCRD} {
		if live := c.crd(crd); live != nil && live.DeletionTimestamp == nil {
			t.Errorf("CRD %s is still there after helm uninstall with crds.keep=false", crd)
		}
	}
}

// helm install into a cluster whose CRDs came from elsewhere (our static
// manifest, or upstream's) reuses them without an error and says so; with
// crds.adopt and --take-ownership the release takes them over and upgrades
// them.
func TestInstallOverExistingCRDs(t *testing.T) {
	for name, apply := range map[string]func(c *cluster){
		"ours (kubectl apply)": func(c *cluster) {
			c.kubectlIn(crdsOnly(t, staticManifest(t)), "apply", "--server-side", "-f", "-")
		},
		"upstream-shaped (kubectl apply)": func(c *cluster) {
			c.kubectlIn(upstreamStatic(c, true), "apply", "-f", "-")
		},
	} {
		t.Run(name, func(t *testing.T) {
			eachHelm(t, func(t *testing.T, c *cluster) { installOverExisting(t, c, apply) })
		})
	}
}

func installOverExisting(t *testing.T, c *cluster, apply func(*cluster)) {
	apply(c)
	c.waitEstablished()
	c.createUserObjects()
	c.createNamespace()
	out := c.helm("install", release, ourChart(), "-n", namespace)
	if !strings.Contains(out, imageListsCRD) || !strings.Contains(out, "reused") {
		t.Errorf("the NOTES do not say that the CRDs were reused:\n%s", out)
	}
	if labels := c.crd(imageListsCRD).Labels; labels["app.kubernetes.io/managed-by"] == "Helm" {
		t.Errorf("a reused CRD was taken over without crds.adopt: labels %v", labels)
	}
	c.userObjectsKept("after helm install")
	c.scanServicePolicyInstalled()

	c.helm("upgrade", release, ourChart(), "-n", namespace, "--reuse-values", "--set", "crds.adopt=true", "--take-ownership", "--force-conflicts")
	if a := c.crd(imageListsCRD).Annotations; a["meta.helm.sh/release-name"] != release {
		t.Errorf("crds.adopt did not make the release the CRD's owner: annotations %v", a)
	}
	c.userObjectsKept("after adopting the CRDs")
	c.servesOurCRDs()
	// Owned now, they are rendered without crds.adopt from then on.
	c.helm("upgrade", release, ourChart(), "-n", namespace)
	c.servesOurCRDs()
}

// From upstream's static manifest to our chart: helm install takes over
// every object it applied (the CRDs too, with crds.adopt), keeping every
// ImageList and ImageJob; the commands are docs/migrating.md's. The
// manager's Deployment goes first: its selector (control-plane only, as
// kustomize wrote it) cannot change to the chart's.
func TestInstallOverUpstreamStaticManifest(t *testing.T) {
	eachHelm(t, installOverUpstreamStatic)
}

func installOverUpstreamStatic(t *testing.T, c *cluster) {
	c.kubectlIn(upstreamStatic(c, false), "apply", "-f", "-")
	c.waitEstablished()
	c.createUserObjects()

	c.kubectlDo("delete", "deployment", "-n", namespace, "eraser-controller-manager")
	c.helm(append([]string{"install", release, ourChart(), "-n", namespace}, append(releaseImages,
		"--set", "crds.adopt=true", "--take-ownership", "--force-conflicts")...)...)
	c.userObjectsKept("after helm install --take-ownership")
	c.servesOurCRDs()
	for _, name := range []string{imageListsCRD, imageJobsCRD} {
		if a := c.crd(name).Annotations; a["meta.helm.sh/release-name"] != release || a["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not the release's, kept on uninstall: annotations %v", name, a)
		}
	}
	c.managerTakesOver("migrate-v1", eraserv1.ReasonNotRunOnAdoption)
	c.helm("upgrade", release, ourChart(), "-n", namespace)
	c.servesOurCRDs()
}

// A typo or a wrong type in runtimeConfig is refused by helm upgrade itself,
// with the key's path, with each Helm CLI, and the release stays as it was:
// the manager never sees the document.
func TestUpgradeRefusesABadRuntimeConfig(t *testing.T) {
	eachHelm(t, func(t *testing.T, c *cluster) {
		c.createNamespace()
		c.helm("install", release, ourChart(), "-n", namespace)
		for what, tc := range map[string]struct{ set, want string }{
			"a typo":       {"runtimeConfig.manager.nodeFilter.selector[0]=a", "selector"},
			"a wrong type": {"runtimeConfig.manager.imageJob.successRatio=all", "successRatio"},
		} {
			out, err := c.helmErr("upgrade", release, ourChart(), "-n", namespace, "--reuse-values", "--set", tc.set)
			if err == nil {
				t.Errorf("%s: helm upgrade --set %s was not refused", what, tc.set)
				continue
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "runtimeConfig") {
				t.Errorf("%s: the refusal does not name runtimeConfig's %s:\n%s", what, tc.want, out)
			}
		}
		if history := c.helm("history", release, "-n", namespace); strings.Count(history, "deployed") != 1 || strings.Contains(history, "failed") {
			t.Errorf("a refused upgrade left a revision:\n%s", history)
		}
	})
}

// helm upgrade --reuse-values --set deploy.scanDB...: the manager's
// Deployment then downloads the vulnerability DB through the proxy with the
// mirror's credentials, as docs/scanner.md tells an operator to do; helm
// rollback takes both off again.
func TestUpgradeSetsScanDBDownload(t *testing.T) {
	eachHelm(t, func(t *testing.T, c *cluster) {
		c.createNamespace()
		c.helm(append([]string{"install", release, ourChart(), "-n", namespace}, releaseImages...)...)
		c.kubectlDo("-n", namespace, "create", "secret", "docker-registry", "trivy-db-mirror",
			"--docker-server=registry.example", "--docker-username=eraser", "--docker-password=secret")
		c.helm("upgrade", release, ourChart(), "-n", namespace, "--reuse-values",
			"--set", "deploy.scanDB.credentialsSecret=trivy-db-mirror", "--set", "deploy.scanDB.proxy=http://proxy.example:3128")
		type download struct {
			Proxy, DockerConfig, Secret, MountedAt string
		}
		read := func() download {
			t.Helper()
			dep := &appsv1.Deployment{}
			if err := c.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "eraser-controller-manager"}, dep); err != nil {
				t.Fatal(err)
			}
			var d download
			spec := dep.Spec.Template.Spec
			m := spec.Containers[0]
			for _, a := range m.Args {
				if v, ok := strings.CutPrefix(a, "--scan-db-proxy="); ok {
					d.Proxy = v
				}
			}
			for _, e := range m.Env {
				if e.Name == "DOCKER_CONFIG" {
					d.DockerConfig = e.Value
				}
			}
			for _, v := range spec.Volumes {
				if v.Secret == nil {
					continue
				}
				for _, vm := range m.VolumeMounts {
					if vm.Name == v.Name && v.Secret.SecretName == "trivy-db-mirror" {
						d.Secret, d.MountedAt = v.Secret.SecretName, vm.MountPath
					}
				}
			}
			return d
		}
		want := download{Proxy: "http://proxy.example:3128", DockerConfig: "/etc/eraser/scan-db-credentials", Secret: "trivy-db-mirror", MountedAt: "/etc/eraser/scan-db-credentials"}
		if diff := cmp.Diff(want, read()); diff != "" {
			t.Errorf("after helm upgrade --set deploy.scanDB... (-want +got):\n%s", diff)
		}
		c.helm("rollback", release, "1", "-n", namespace)
		if diff := cmp.Diff(download{}, read()); diff != "" {
			t.Errorf("after helm rollback (-want +got):\n%s", diff)
		}
	})
}

// helm upgrade --reuse-values --set-json runtimeConfig.manager.leftovers...:
// the manager's configuration then reclaims the kinds named, as
// docs/reclaim.md tells an operator to turn it on; helm rollback turns it
// off again, and a misspelt key is refused by helm upgrade itself.
func TestUpgradeSetsLeftoverReclaim(t *testing.T) {
	eachHelm(t, func(t *testing.T, c *cluster) {
		c.createNamespace()
		c.helm("install", release, ourChart(), "-n", namespace)
		read := func() config.Leftovers {
			t.Helper()
			cm := &corev1.ConfigMap{}
			if err := c.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "eraser-manager-config"}, cm); err != nil {
				t.Fatal(err)
			}
			for _, doc := range cm.Data {
				cfg, _, err := config.Parse([]byte(doc))
				if err != nil {
					t.Fatalf("the release's configuration: %v", err)
				}
				return cfg.Manager.Leftovers
			}
			t.Fatal("the manager's ConfigMap holds no configuration")
			return config.Leftovers{}
		}
		if diff := cmp.Diff(config.Leftovers{}, read()); diff != "" {
			t.Errorf("installed: leftovers reclaimed by default (-want +got):\n%s", diff)
		}
		if out, err := c.helmErr("upgrade", release, ourChart(), "-n", namespace, "--reuse-values", "--set-json", `runtimeConfig.manager.leftovers.reclaims=["unnamed-image"]`); err == nil || !strings.Contains(out, "reclaims") {
			t.Errorf("a misspelt leftovers key was not refused by name: %v\n%s", err, out)
		}
		c.helm("upgrade", release, ourChart(), "-n", namespace, "--reuse-values",
			"--set-json", `runtimeConfig.manager.leftovers.reclaim=["unnamed-image","other-namespace"]`,
			"--set-json", `runtimeConfig.manager.leftovers.namespaces=["default"]`,
			"--set-json", `runtimeConfig.manager.leftovers.recordAge="30m"`)
		want := config.Leftovers{Reclaim: []string{"unnamed-image", "other-namespace"}, Namespaces: []string{"default"}, RecordAge: 30 * time.Minute}
		if diff := cmp.Diff(want, read()); diff != "" {
			t.Errorf("after helm upgrade --set-json runtimeConfig.manager.leftovers... (-want +got):\n%s", diff)
		}
		c.helm("rollback", release, "1", "-n", namespace)
		if diff := cmp.Diff(config.Leftovers{}, read()); diff != "" {
			t.Errorf("after helm rollback (-want +got):\n%s", diff)
		}
	})
}
