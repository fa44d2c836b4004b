package render

// Values a user sets, what the chart and its schema refuse, and helm lint.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

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
	wantRetention := config.Retention{MinAge: 30 * time.Minute, UnusedFor: 720 * time.Hour, HighThresholdPercent: 85, LowThresholdPercent: 80, ImageFsPath: "/data/containerd", CoolDown: workerdefaults.CoolDown,
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

// deploy.scanDB: a private dbRepo's credentials reach the manager as
// Docker's config.json (the one place the manager reads registry
// credentials from), the proxy as its flag; unset, neither appears.
func TestChartScanDBDownload(t *testing.T) {
	type download struct {
		Args         []string
		DockerConfig string
		Mounts       []corev1.VolumeMount
		Secret       *corev1.SecretVolumeSource
	}
	cases := map[string]struct {
		set  []string
		want download
	}{
		"defaults": {want: download{}},
		"a private dbRepo behind a proxy": {
			set: []string{"deploy.scanDB.credentialsSecret=trivy-db-mirror", "deploy.scanDB.proxy=http://proxy.example:3128"},
			want: download{
				Args:         []string{"--scan-db-proxy=http://proxy.example:3128"},
				DockerConfig: "/etc/eraser/scan-db-credentials",
				Mounts:       []corev1.VolumeMount{{Name: "scan-db-credentials", MountPath: "/etc/eraser/scan-db-credentials", ReadOnly: true}},
				Secret:       &corev1.SecretVolumeSource{SecretName: "trivy-db-mirror", Items: []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "config.json"}}},
			},
		},
	}
	got, want := map[string]download{}, map[string]download{}
	for name, tc := range cases {
		objs := render(t, Options{Set: tc.set})
		pod := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager").Spec.Template.Spec
		c := pod.Containers[0]
		var d download
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--scan-db-proxy") {
				d.Args = append(d.Args, a)
			}
		}
		for _, e := range c.Env {
			if e.Name == "DOCKER_CONFIG" {
				d.DockerConfig = e.Value
			}
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "scan-db-credentials" {
				d.Mounts = append(d.Mounts, m)
			}
		}
		for _, v := range pod.Volumes {
			if v.Name == "scan-db-credentials" {
				d.Secret = v.Secret
			}
		}
		got[name], want[name] = d, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the manager's DB download (-want +got):\n%s", diff)
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

func writeValues(t *testing.T, doc string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// values.schema.json refuses a typo at the top level, in deploy, in
// metrics and in runtimeConfig, naming the key, while every values file
// written for upstream's chart still renders.
func TestChartSchema(t *testing.T) {
	refused := map[string]struct{ values, want string }{
		"deploy typo":         {"deploy:\n  replicass: 2\n", "at '/deploy': additional properties 'replicass' not allowed"},
		"deploy.image typo":   {"deploy:\n  image:\n    reop: registry.example/manager\n", "at '/deploy/image': additional properties 'reop' not allowed"},
		"unknown top level":   {"runtimeConfig: {}\nrutimeConfig:\n  manager: {}\n", "at '': additional properties 'rutimeConfig' not allowed"},
		"metrics typo":        {"metrics:\n  serviceMonitor:\n    enable: true\n", "at '/metrics/serviceMonitor': additional properties 'enable' not allowed"},
		"wrong type":          {"deploy:\n  replicas: two\n", "at '/deploy/replicas'"},
		"bad pull policy":     {"deploy:\n  image:\n    pullPolicy: Sometimes\n", "at '/deploy/image/pullPolicy'"},
		"registry not a host": {"imageRegistry: \"https://registry.example\"\n", "at '/imageRegistry'"},
		// runtimeConfig's schema is generated from the configuration's types.
		"runtimeConfig typo":        {"runtimeConfig:\n  manager:\n    nodeFilter:\n      selector: [a]\n", "at '/runtimeConfig/manager/nodeFilter': additional properties 'selector' not allowed"},
		"runtimeConfig wrong type":  {"runtimeConfig:\n  manager:\n    imageJob:\n      successRatio: all\n", "at '/runtimeConfig/manager/imageJob/successRatio'"},
		"runtimeConfig unknown top": {"runtimeConfig:\n  anything: {goes: here}\n", "at '/runtimeConfig': additional properties 'anything' not allowed"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, ValuesFiles: []string{writeValues(t, tc.values)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}

	// The defaults, every documented value (TestChartValues) and every
	// upstream values file pass the schema.
	accepted := append(ownUpstreamValues(t), upstreamValuesIfPresent()...)
	accepted = append(accepted, writeValues(t, "runtimeConfig:\n  health: {anything: goes}\n  manager: {runtime: crio}\ndeploy:\n  image: {tag: 1.2}\nglobal: {}\n"))
	for _, f := range append([]string{""}, accepted...) {
		var files []string
		if f != "" {
			files = []string{f}
		}
		if _, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, ValuesFiles: files}); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}

// imageRegistry moves every image at the default location to the mirror,
// the tags unchanged, keeps one already under it, and refuses to render
// with one anywhere else, naming the value.
func TestChartImageRegistry(t *testing.T) {
	for _, value := range []string{"deploy.image.repo", "runtimeConfig.components.remover.image.repo", "runtimeConfig.components.collector.windows.image.repo"} {
		_, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, Set: []string{"imageRegistry=registry.example:5000/mirror", value + "=other.example/image"}})
		if err == nil || !strings.Contains(err.Error(), "cannot move other.example/image ("+value+")") {
			t.Errorf("%s outside the default location, with imageRegistry: error %v, want one naming it", value, err)
		}
	}
	const mirror = "registry.example:5000/mirror"
	mirrored := func(name, tag string) string { return mirror + "/" + name + ":" + tag }
	cases := map[string]struct {
		o                    Options
		manager, windowsRepo string
		workers              []string // collector, scanner, remover
	}{
		"defaults": {
			o:       Options{Set: []string{"imageRegistry=" + mirror + "/"}},
			manager: mirrored("eraser-manager", version.Version),
			workers: []string{mirrored("collector", version.Version), mirrored("eraser-trivy-scanner", version.Version), mirrored("remover", version.Version)},
		},
		"repositories set at the default location moved, under windows too, tags kept": {
			o: Options{Set: []string{
				"imageRegistry=" + mirror,
				"runtimeConfig.components.remover.image.tag=v2",
				"runtimeConfig.components.scanner.image.repo=" + version.DefaultRepo + "/eraser-trivy-scanner",
				"runtimeConfig.components.collector.windows.image.repo=" + version.DefaultRepo + "/collector",
				"runtimeConfig.components.collector.windows.image.tag=win",
			}},
			manager:     mirrored("eraser-manager", version.Version),
			workers:     []string{mirrored("collector", version.Version), mirrored("eraser-trivy-scanner", version.Version), mirrored("remover", "v2")},
			windowsRepo: mirror + "/collector",
		},
		"repositories set under imageRegistry kept": {
			o: Options{Set: []string{
				"imageRegistry=" + mirror,
				"deploy.image.repo=" + mirror + "/eraser-manager",
				"runtimeConfig.components.remover.image.repo=" + mirror + "/remover",
			}},
			manager: mirrored("eraser-manager", version.Version),
			workers: []string{mirrored("collector", version.Version), mirrored("eraser-trivy-scanner", version.Version), mirrored("remover", version.Version)},
		},
		// v1.0.0's values: components.eraser is the remover; upstream's
		// images and release tags become this release's, from the mirror.
		"upstream v1alpha1 values": {
			o:       Options{ValuesFiles: []string{repoPath("internal", "wire", "config", "testdata", "upstream", "values-v1alpha1.yaml")}, Set: []string{"imageRegistry=" + mirror}},
			manager: mirrored("eraser-manager", version.Version),
			workers: []string{mirrored("collector", version.Version), mirrored("eraser-trivy-scanner", version.Version), mirrored("remover", version.Version)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := render(t, tc.o)
			checkInstall(t, objs, DefaultNamespace)
			cfg, _ := managerConfig(t, objs)
			c := cfg.Components
			if diff := cmp.Diff(tc.workers, []string{c.Collector.Image.Ref(), c.Scanner.Image.Ref(), c.Remover.Image.Ref()}); diff != "" {
				t.Errorf("worker images (-want +got):\n%s", diff)
			}
			if tc.windowsRepo != "" && c.Collector.Windows.Image.Repo != tc.windowsRepo {
				t.Errorf("collector's Windows image %s, want repo %s", c.Collector.Windows.Image.Ref(), tc.windowsRepo)
			}
			dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
			if got := dep.Spec.Template.Spec.Containers[0].Image; got != tc.manager {
				t.Errorf("manager image %s, want %s", got, tc.manager)
			}
		})
	}
}
