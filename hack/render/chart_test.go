package render

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// shippedConfig is the EraserConfig of the static manifest.
func shippedConfig(t *testing.T) *config.Config {
	t.Helper()
	data, err := os.ReadFile(repoPath("config", "manager", "controller_manager_config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := config.Parse(data)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("shipped EraserConfig: %v, warnings %q", err, warnings)
	}
	return cfg
}

// managerConfig parses the EraserConfig the objects ship, as the manager
// would at start.
func managerConfig(t *testing.T, objs objects) (*config.Config, []string) {
	t.Helper()
	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", config.ConfigMapName)
	doc, ok := cm.Data[config.ConfigKey]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Name, config.ConfigKey)
	}
	cfg, warnings, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("the manager would refuse the EraserConfig: %v\n%s", err, doc)
	}
	return cfg, warnings
}

// generatedRules are controller-gen's rules for the ClusterRole and Role.
func generatedRules(t *testing.T) map[string][]rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(repoPath("config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]rbacv1.PolicyRule{}
	for _, u := range decode(t, string(data)) {
		var role rbacv1.Role // a ClusterRole's rules decode the same way
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatal(err)
		}
		out[u.GetKind()] = role.Rules
	}
	return out
}

// checkInstall asserts what every way of installing must get right, for a
// release in namespace ns.
func checkInstall(t *testing.T, objs objects, ns string) {
	t.Helper()
	rules := generatedRules(t)
	if got := get[rbacv1.ClusterRole](t, objs, "ClusterRole", "eraser-manager-role").Rules; !cmp.Equal(got, rules["ClusterRole"]) {
		t.Errorf("ClusterRole rules differ from config/rbac/role.yaml:\n%s", cmp.Diff(rules["ClusterRole"], got))
	}
	role := get[rbacv1.Role](t, objs, "Role", "eraser-manager-role")
	if !cmp.Equal(role.Rules, rules["Role"]) || role.Namespace != ns {
		t.Errorf("Role in %q, rules differ from config/rbac/role.yaml:\n%s", role.Namespace, cmp.Diff(rules["Role"], role.Rules))
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: "eraser-controller-manager", Namespace: ns}
	crb := get[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "eraser-manager-rolebinding")
	rb := get[rbacv1.RoleBinding](t, objs, "RoleBinding", "eraser-manager-rolebinding")
	if crb.RoleRef.Name != "eraser-manager-role" || rb.RoleRef.Name != "eraser-manager-role" ||
		!cmp.Equal(crb.Subjects, []rbacv1.Subject{subject}) || !cmp.Equal(rb.Subjects, []rbacv1.Subject{subject}) || rb.Namespace != ns {
		t.Errorf("bindings do not bind the manager's account %v: %+v %+v", subject, crb, rb)
	}

	workers := get[corev1.ServiceAccount](t, objs, "ServiceAccount", podspec.ServiceAccount)
	if workers.AutomountServiceAccountToken == nil || *workers.AutomountServiceAccountToken {
		t.Errorf("worker ServiceAccount %s must not mount a token", workers.Name)
	}
	openshift := find(objs, "SecurityContextConstraints", "eraser-workers") != nil
	if openshift {
		// The one right the workers' account has: to be admitted under
		// their SCC, which is no API access.
		role := get[rbacv1.ClusterRole](t, objs, "ClusterRole", "eraser-workers-scc")
		want := []rbacv1.PolicyRule{{APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"}, ResourceNames: []string{"eraser-workers"}, Verbs: []string{"use"}}}
		if diff := cmp.Diff(want, role.Rules); diff != "" {
			t.Errorf("the workers' SCC role grants more than use (-want +got):\n%s", diff)
		}
	}
	for _, u := range objs {
		if b := u.GetKind(); (b == "RoleBinding" || b == "ClusterRoleBinding") && !(openshift && u.GetName() == "eraser-workers-scc") {
			for _, s := range u.Object["subjects"].([]any) {
				if s.(map[string]any)["name"] == podspec.ServiceAccount {
					t.Errorf("%s %s binds the worker account, which needs no API access", b, u.GetName())
				}
			}
		}
	}

	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != "eraser-controller-manager" {
		t.Errorf("manager runs as %q", pod.ServiceAccountName)
	}
	psc := pod.SecurityContext
	// On OpenShift restricted-v2 assigns the user, and refuses another.
	pinned := psc != nil && psc.RunAsUser != nil && *psc.RunAsUser == 65532
	if openshift {
		pinned = psc != nil && psc.RunAsUser == nil
	}
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || !pinned ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context is not restricted: %+v", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one manager container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
		!*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context is not restricted: %+v", sc)
	}
	if !slices.Contains(c.Args, "--config=/config/"+config.ConfigKey) {
		t.Errorf("manager args %q lack --config", c.Args)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == config.ConfigMapName && m.MountPath == "/config" {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("ConfigMap %s is not mounted at /config", config.ConfigMapName)
	}
	envOK := false
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			envOK = true
		}
	}
	if !envOK {
		t.Errorf("POD_NAMESPACE does not come from the downward API: %+v", c.Env)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port != intstr.FromString("health") {
			t.Errorf("probe %s: %+v", path, probe)
		}
	}
	healthPort := false
	for _, p := range c.Ports {
		healthPort = healthPort || (p.Name == "health" && p.ContainerPort == 8081)
	}
	if !healthPort {
		t.Errorf("no health port 8081: %+v", c.Ports)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("manager resources unset: %+v", c.Resources)
	}
}

func TestChartDefaults(t *testing.T) {
	objs := render(t, Options{})
	checkInstall(t, objs, DefaultNamespace)

	cfg, warnings := managerConfig(t, objs)
	if len(warnings) > 0 {
		t.Errorf("default values draw warnings: %q", warnings)
	}
	if cfg.APIVersion != config.LatestVersion {
		t.Errorf("apiVersion %s, want %s", cfg.APIVersion, config.LatestVersion)
	}
	// The chart and the static manifest configure the same thing.
	shipped := shippedConfig(t)
	shipped.APIVersion = cfg.APIVersion
	if diff := cmp.Diff(shipped, cfg, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("chart defaults differ from config/manager/controller_manager_config.yaml:\n%s", diff)
	}

	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	if want := "ghcr.io/eraser-oss/eraser-manager:" + version.Version; dep.Spec.Template.Spec.Containers[0].Image != want {
		t.Errorf("image %s, want %s", dep.Spec.Template.Spec.Containers[0].Image, want)
	}
	if *dep.Spec.Replicas != 1 {
		t.Errorf("replicas %d", *dep.Spec.Replicas)
	}
	// upstream's selector, so that helm upgrade can take over its releases
	want := map[string]string{
		"app.kubernetes.io/instance": DefaultRelease, "app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/name": "eraser", "control-plane": "controller-manager", "helm.sh/chart": "eraser",
	}
	if !cmp.Equal(dep.Spec.Selector.MatchLabels, want) {
		t.Errorf("selector %v, want %v", dep.Spec.Selector.MatchLabels, want)
	}

	var crds []string
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, u.GetName())
		}
	}
	slices.Sort(crds)
	if !cmp.Equal(crds, []string{"imagejobs.eraser.sh", "imagelists.eraser.sh"}) {
		t.Errorf("CRDs %v", crds)
	}
}

func TestChartVersionFollowsManager(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != version.Version || "v"+chart.Version != version.Version {
		t.Errorf("Chart.yaml version %s, appVersion %s; the manager is %s", chart.Version, chart.AppVersion, version.Version)
	}
}

func TestStaticManifest(t *testing.T) {
	objs := staticManifest(t)
	checkInstall(t, objs, DefaultNamespace)
	cfg, _ := managerConfig(t, objs)
	if diff := cmp.Diff(shippedConfig(t), cfg, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("deploy/eraser.yaml is stale against config/manager (run make manifests):\n%s", diff)
	}
	ns := get[corev1.Namespace](t, objs, "Namespace", DefaultNamespace)
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace labels %v: workers need the privileged level", ns.Labels)
	}
	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	if want := "ghcr.io/eraser-oss/eraser-manager:" + version.Version; dep.Spec.Template.Spec.Containers[0].Image != want {
		t.Errorf("image %s, want %s", dep.Spec.Template.Spec.Containers[0].Image, want)
	}
}

const helmWarning = "ignored, as by upstream Eraser; the manager's flags configure it"

var helmWarnings = []string{"health: " + helmWarning, "metrics: " + helmWarning, "webhook: " + helmWarning, "leaderElection: " + helmWarning}

// Values files shaped like upstream's install unchanged, and each value
// reaches the manager: the project's own fixtures, checked on every run.
func TestChartUpstreamShapedValues(t *testing.T) {
	defaults, _ := managerConfig(t, render(t, Options{}))
	managerImage := "ghcr.io/eraser-oss/eraser-manager:" + version.Version
	cases := map[string]struct {
		apiVersion   string
		warnings     []string
		images       []string // collector, scanner, remover
		managerImage string
		// sameAsDefaults: nothing in the file reaches the EraserConfig.
		sameAsDefaults bool
	}{
		// Upstream's images and release tags become this release's
		// (TestChartTranslatesUpstreamValues).
		"values-v1alpha1.yaml": {
			apiVersion: config.VersionV1alpha1, warnings: helmWarnings, managerImage: managerImage,
			images: []string{defaultImage("collector", version.Version), defaultImage("eraser-trivy-scanner", version.Version), defaultImage("remover", version.Version)},
		},
		"values-v1alpha3.yaml": {
			apiVersion: config.VersionV1alpha3, warnings: helmWarnings, managerImage: managerImage,
			images: []string{defaultImage("collector", version.Version), defaultImage("eraser-trivy-scanner", version.Version), defaultImage("remover", version.Version)},
		},
		"values-e2e-images.yaml": {
			apiVersion: config.VersionV1alpha3, managerImage: "fixture-manager-hbn:t-manager-84",
			images: []string{"fixture-collector-jwx:t-collector-82", "fixture-scanner-pkd:t-scanner-83", "fixture-remover-qzv:t-remover-81"},
		},
		"values-e2e-legacy-key.yaml": {apiVersion: config.VersionV1alpha3, managerImage: managerImage, sameAsDefaults: true},
	}
	files := ownUpstreamValues(t)
	if len(files) != len(cases) {
		t.Errorf("%d values files, %d cases: each file needs its expectations", len(files), len(cases))
	}
	for _, f := range files {
		tc, ok := cases[filepath.Base(f)]
		if !ok {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			objs := render(t, Options{ValuesFiles: []string{f}})
			checkInstall(t, objs, DefaultNamespace)
			cfg, warnings := managerConfig(t, objs)
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if cfg.APIVersion != tc.apiVersion {
				t.Errorf("apiVersion %s, want %s", cfg.APIVersion, tc.apiVersion)
			}
			if tc.sameAsDefaults {
				if diff := cmp.Diff(defaults, cfg, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("EraserConfig differs from the chart's defaults (-want +got):\n%s", diff)
				}
			} else {
				c := cfg.Components
				if diff := cmp.Diff(tc.images, []string{c.Collector.Image.Ref(), c.Scanner.Image.Ref(), c.Remover.Image.Ref()}); diff != "" {
					t.Errorf("worker images (-want +got):\n%s", diff)
				}
			}
			dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
			if got := dep.Spec.Template.Spec.Containers[0].Image; got != tc.managerImage {
				t.Errorf("manager image %s, want %s", got, tc.managerImage)
			}
		})
	}
}

func defaultImage(name, tag string) string { return version.DefaultRepo + "/" + name + ":" + tag }

// Upstream's own values files install unchanged: the document they produce
// is one the manager accepts, in the version they were written for.
func TestChartUpstreamValues(t *testing.T) {
	wantVersion := map[string]string{
		"v1.0.0-values.yaml": config.VersionV1alpha1,
	}
	for _, f := range upstreamHelmValues(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			objs := render(t, Options{ValuesFiles: []string{f}})
			checkInstall(t, objs, DefaultNamespace)
			cfg, warnings := managerConfig(t, objs)
			t.Logf("apiVersion %s, warnings: %q", cfg.APIVersion, warnings)
			want := wantVersion[filepath.Base(f)]
			if want == "" {
				want = config.VersionV1alpha3
			}
			if cfg.APIVersion != want {
				t.Errorf("apiVersion %s, want %s", cfg.APIVersion, want)
			}
		})
	}
}
