package render

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/config"
	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/podspec"
	"github.com/eraser-oss/eraser/internal/version"
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
	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", manager.DefaultConfigMapName)
	doc, ok := cm.Data[manager.ConfigKey]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Name, manager.ConfigKey)
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
	for _, u := range objs {
		if b := u.GetKind(); b == "RoleBinding" || b == "ClusterRoleBinding" {
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
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
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
	if !slices.Contains(c.Args, "--config=/config/"+manager.ConfigKey) {
		t.Errorf("manager args %q lack --config", c.Args)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == manager.DefaultConfigMapName && m.MountPath == "/config" {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("ConfigMap %s is not mounted at /config", manager.DefaultConfigMapName)
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
		"values-v1alpha1.yaml": {
			apiVersion: config.VersionV1alpha1, warnings: helmWarnings, managerImage: "ghcr.io/azure/eraser-manager:v1.0.0",
			images: []string{defaultImage("collector", "v1.0.0"), defaultImage("eraser-trivy-scanner", "v1.0.0"), defaultImage("remover", "v1.0.0")},
		},
		"values-v1alpha3.yaml": {
			apiVersion: config.VersionV1alpha3, warnings: helmWarnings, managerImage: "ghcr.io/eraser-dev/eraser-manager:v1.5.0-beta.0",
			images: []string{defaultImage("collector", "v1.5.0-beta.0"), defaultImage("eraser-trivy-scanner", "v1.5.0-beta.0"), defaultImage("remover", "v1.5.0-beta.0")},
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

// Every value the chart documents reaches the object it is for.
func TestChartValues(t *testing.T) {
	objs := render(t, Options{
		Release:   "cleaner",
		Namespace: "ops",
		Set: []string{
			"deploy.replicas=2",
			"deploy.image.repo=registry.example/eraser-manager",
			"deploy.image.tag=v9.9.9",
			"deploy.image.pullPolicy=Always",
			"deploy.additionalArgs={--log-level=debug}",
			"deploy.priorityClassName=system-cluster-critical",
			"deploy.additionalPodLabels.team=platform",
			"deploy.securityContext.runAsUser=1000",
			"deploy.resources.limits.memory=512Mi",
			"deploy.nodeSelector.pool=system",
			"deploy.tolerations[0].key=dedicated",
			"deploy.tolerations[0].operator=Exists",
			"deploy.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
			"deploy.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
			"nameOverride=cleaner",
			"runtimeConfig.manager.pullSecrets={regcred}",
			"runtimeConfig.manager.scheduling.cron=0 3 * * *",
			"runtimeConfig.manager.imageJob.maxConcurrentNodes=10%",
			"runtimeConfig.manager.imageJob.podStartTimeout=5m",
			"runtimeConfig.manager.imageJob.podRunTimeout=2h",
			"runtimeConfig.manager.retention.minAge=30m",
			"runtimeConfig.manager.retention.unusedFor=720h",
			"runtimeConfig.manager.retention.highThresholdPercent=85",
			"runtimeConfig.manager.retention.lowThresholdPercent=80",
			"runtimeConfig.manager.retention.imageFsPath=/data/containerd",
			"runtimeConfig.manager.retention.removeVulnerableReferenced=false",
			"runtimeConfig.manager.retention.protectNotRepullable=false",
			"runtimeConfig.manager.imageJob.nodeSelector.pool=general",
			"runtimeConfig.manager.imageJob.tolerations[0].key=dedicated",
			"runtimeConfig.manager.imageJob.tolerations[0].operator=Exists",
			"runtimeConfig.manager.imageJob.tolerations[0].effect=NoSchedule",
			"runtimeConfig.manager.runtime.name=containerd",
			"runtimeConfig.manager.runtime.windowsAddress=npipe://./pipe/custom",
			"runtimeConfig.components.remover.windows.image.repo=registry.example/remover-windows",
			"runtimeConfig.components.remover.windows.image.tag=v1",
			"runtimeConfig.components.remover.windows.command={remover.exe,--windows}",
			"runtimeConfig.components.scanner.enabled=false",
		},
	})
	checkInstall(t, objs, "ops")

	cfg, warnings := managerConfig(t, objs)
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}
	m := cfg.Manager
	remover := cfg.Components.Remover
	if m.Scheduling.Cron != "0 3 * * *" || m.ImageJob.MaxConcurrentNodes.Percent != 10 || m.ImageJob.PodStartTimeout != 5*time.Minute ||
		m.ImageJob.PodRunTimeout != 2*time.Hour || m.Runtime.WindowsAddress != "npipe://./pipe/custom" ||
		remover.WindowsImage().Ref() != "registry.example/remover-windows:v1" || !cmp.Equal(remover.Windows.Command, []string{"remover.exe", "--windows"}) ||
		cfg.Components.Scanner.Enabled || !cmp.Equal(m.PullSecrets, []string{"regcred"}) ||
		m.ImageJob.NodeSelector["pool"] != "general" || len(m.ImageJob.Tolerations) != 1 || m.ImageJob.Tolerations[0].Key != "dedicated" {
		t.Errorf("EraserConfig did not take the values: %+v %+v", m, cfg.Components)
	}
	wantRetention := config.Retention{MinAge: 30 * time.Minute, UnusedFor: 720 * time.Hour, HighThresholdPercent: 85, LowThresholdPercent: 80, ImageFsPath: "/data/containerd",
		KeepVulnerableReferenced: true, RemoveNotRepullable: true}
	if diff := cmp.Diff(wantRetention, m.Retention); diff != "" {
		t.Errorf("retention (-want +got):\n%s", diff)
	}

	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	switch {
	case *dep.Spec.Replicas != 2:
		t.Errorf("replicas %d", *dep.Spec.Replicas)
	case c.Image != "registry.example/eraser-manager:v9.9.9" || c.ImagePullPolicy != corev1.PullAlways:
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	case !slices.Contains(c.Args, "--log-level=debug"):
		t.Errorf("args %q", c.Args)
	case pod.PriorityClassName != "system-cluster-critical":
		t.Errorf("priorityClassName %q", pod.PriorityClassName)
	case dep.Spec.Template.Labels["team"] != "platform" || dep.Spec.Template.Labels["app.kubernetes.io/name"] != "cleaner":
		t.Errorf("pod labels %v", dep.Spec.Template.Labels)
	case c.SecurityContext.RunAsUser == nil || *c.SecurityContext.RunAsUser != 1000:
		t.Errorf("security context not merged: %+v", c.SecurityContext)
	case c.Resources.Limits.Memory().String() != "512Mi":
		t.Errorf("resources %+v", c.Resources)
	case pod.NodeSelector["pool"] != "system" || pod.NodeSelector["kubernetes.io/os"] != "linux":
		t.Errorf("nodeSelector %v", pod.NodeSelector)
	case len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated":
		t.Errorf("tolerations %+v", pod.Tolerations)
	case pod.Affinity == nil || pod.Affinity.NodeAffinity == nil:
		t.Errorf("affinity %+v", pod.Affinity)
	case len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "regcred":
		t.Errorf("imagePullSecrets %+v", pod.ImagePullSecrets)
	}
}

func TestChartRefusesOldClusters(t *testing.T) {
	if _, err := Chart(chartDir(), Options{KubeVersion: "v1.25.9"}); err == nil {
		t.Error("rendered for Kubernetes 1.25, which lacks GA HostProcess pods")
	}
}

// A key of deploy.securityContext replaces the chart's, even with false.
func TestChartSecurityContextOverride(t *testing.T) {
	objs := render(t, Options{Set: []string{"deploy.securityContext.readOnlyRootFilesystem=false"}})
	sc := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager").Spec.Template.Spec.Containers[0].SecurityContext
	if *sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("security context %+v", sc)
	}
}

// The chart passes `helm lint --strict`, with its defaults and with each
// upstream values file.
func TestChartLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	valueSets := map[string][]string{"defaults": nil}
	for _, f := range ownUpstreamValues(t) {
		valueSets[filepath.Base(f)] = []string{f}
	}
	for _, f := range upstreamValuesIfPresent() {
		valueSets["upstream "+filepath.Base(f)] = []string{f}
	}
	for name, files := range valueSets {
		vals, err := (&values.Options{ValueFiles: files}).MergeValues(getter.Providers{})
		if err != nil {
			t.Fatal(err)
		}
		lint := action.NewLint()
		lint.Strict, lint.Namespace, lint.KubeVersion = true, DefaultNamespace, kv
		res := lint.Run([]string{chartDir()}, vals)
		if res.TotalChartsLinted != 1 {
			t.Errorf("%s: linted %d charts", name, res.TotalChartsLinted)
		}
		for _, m := range res.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("%s: %s", name, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("%s: %v", name, err)
		}
	}
}
