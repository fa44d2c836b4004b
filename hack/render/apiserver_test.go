package render

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// The static manifest is what `kubectl apply --server-side -f
// deploy/eraser.yaml` creates, for real.
func TestStaticManifestApplies(t *testing.T) {
	apply(t, staticManifest(t), false)
}

// Each chart render is accepted by the API server, in the namespace it was
// rendered for.
func TestChartApplies(t *testing.T) {
	testenv.Require(t)
	cases := map[string]Options{
		"defaults": {},
		"values": {Set: []string{"deploy.replicas=2", "deploy.tolerations[0].operator=Exists", "deploy.additionalArgs={--log-level=debug}",
			"deploy.scanDB.credentialsSecret=trivy-db-mirror", "deploy.scanDB.proxy=http://proxy.example:3128"}},
		// The Prometheus operator's kinds are left out: this API server has
		// none of its CRDs (TestChartMetrics checks them rendered).
		"mirror and dashboard": {Set: []string{"imageRegistry=registry.example/mirror", "metrics.grafanaDashboard.enabled=true"}},
	}
	for _, f := range ownUpstreamValues(t) {
		cases["upstream-shaped "+filepath.Base(f)] = Options{ValuesFiles: []string{f}}
	}
	if files := upstreamValuesIfPresent(); files != nil {
		for _, f := range files {
			cases["upstream "+filepath.Base(f)] = Options{ValuesFiles: []string{f}}
		}
	} else {
		t.Logf("upstream's own Helm values are not at %s: applying the project's values files only", upstreamValuesGlob())
	}
	n := 0
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			n++
			o.Namespace = fmt.Sprintf("chart-%d", n)
			namespace(t, o.Namespace, nil)
			apply(t, render(t, o), true)
		})
	}
}

func namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := env.Client.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// The Pod Security levels docs/install.md states: the namespace's level
// admits every worker pod; one level lower refuses them; the manager's pod
// meets the strictest level.
func TestPodSecurity(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	objs := staticManifest(t)
	apply(t, objs, false)
	ns := get[corev1.Namespace](t, objs, "Namespace", DefaultNamespace)
	namespace(t, "psa-baseline", map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
	namespace(t, "psa-restricted", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})

	cfg, _, err := config.Parse([]byte(get[corev1.ConfigMap](t, objs, "ConfigMap", config.ConfigMapName).Data[config.ConfigKey]))
	if err != nil {
		t.Fatal(err)
	}
	workers := map[string]podspec.Params{
		"linux collector+scanner": {Kind: podspec.KindCollector, OS: podpaths.Linux},
		"linux manual":            {Kind: podspec.KindManual, OS: podpaths.Linux},
		"windows manual":          {Kind: podspec.KindManual, OS: podpaths.Windows},
	}
	for name, p := range workers {
		p.Job, p.JobUID, p.Node, p.Config = "imagejob-psa", "0f0f0f0f-0000-4000-8000-000000000000", "node-1", cfg
		p.ConfigMap, p.ConfigKey, p.LogLevel = "imagejob-psa", config.ConfigKey, "info"
		// The wave's references: a downward API file and projected
		// ConfigMaps, which Pod Security's restricted level allows.
		p.References, p.NodeReferences = []string{"imagejob-psa-refs-0123456789abcdef-1"}, references.EncodeNode(nil)
		for _, target := range []struct {
			ns    string
			admit bool
		}{{ns.Name, true}, {"psa-baseline", false}} {
			p.Namespace = target.ns
			pod, err := podspec.Build(p)
			if err != nil {
				t.Fatal(err)
			}
			err = env.Client.Create(ctx, pod, client.DryRunAll)
			switch {
			case target.admit && err != nil:
				t.Errorf("%s worker refused in %s (%v): %v", name, target.ns, ns.Labels, err)
			case !target.admit && err == nil:
				t.Errorf("%s worker admitted at baseline: the namespace could enforce less than privileged", name)
			case !target.admit && !strings.Contains(err.Error(), "violates PodSecurity"):
				t.Errorf("%s worker refused at baseline for another reason: %v", name, err)
			}
		}
	}

	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	mgr := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "manager", Namespace: "psa-restricted"}, Spec: dep.Spec.Template.Spec}
	if err := env.Client.Create(ctx, mgr, client.DryRunAll); err != nil {
		t.Errorf("the manager pod does not meet the restricted level: %v", err)
	}
}
