package migration

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

const ns = "eraser-system"

func deployment(namespace, image string, mutate ...func(*appsv1.Deployment)) appsv1.Deployment {
	d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "eraser-controller-manager",
		Labels: map[string]string{"control-plane": "controller-manager"}}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "manager", Image: image}}
	for _, m := range mutate {
		m(&d)
	}
	return d
}

func configMap(name string, labels map[string]string, data map[string]string) corev1.ConfigMap {
	return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
}

func exclusions(name, doc string) corev1.ConfigMap {
	return configMap(name, map[string]string{LabelExclusionList: "true"}, map[string]string{"list.json": doc})
}

func imageList(name string, dryRun bool, images ...string) eraserv1.ImageList {
	return eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: eraserv1.ImageListSpec{Images: images, DryRun: dryRun}}
}

// short is a finding as the tests compare it: severity, area, object and
// a telling part of the text.
type short struct{ Severity, Area, Object, Has string }

func match(t *testing.T, got []Finding, want []short) {
	t.Helper()
	var gotShort []short
	for i, f := range got {
		s := short{Severity: f.Severity.String(), Area: f.Area, Object: f.Object}
		if i < len(want) && strings.Contains(f.What, want[i].Has) {
			s.Has = want[i].Has
		} else {
			s.Has = f.What
		}
		gotShort = append(gotShort, s)
	}
	if diff := cmp.Diff(want, gotShort); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

const upstreamConfig = `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  runtime: {name: containerd, address: unix:///run/containerd/containerd.sock}
  nodeFilter: {type: include, selectors: [team=a]}
components:
  collector: {enabled: true}
  scanner: {enabled: true}
`

// sizesConfig is a configuration with the scanner and remover given, the
// remover under key (eraser in v1alpha1), and no other finding.
func sizesConfig(scanner, key, remover string) string {
	version := "v1alpha2"
	if key == "eraser" {
		version = "v1alpha1"
	}
	return "apiVersion: eraser.sh/" + version + "\nkind: EraserConfig\ncomponents:\n  scanner: " + scanner + "\n  " + key + ": " + remover + "\n"
}

func TestCheck(t *testing.T) {
	cases := map[string]struct {
		cluster Cluster
		want    []short
	}{
		"nothing":           {},
		"this Eraser alone": {cluster: Cluster{Deployments: []appsv1.Deployment{deployment(ns, "ghcr.io/eraser-oss/eraser-manager:v0.1.0")}}},
		"upstream's release here": {cluster: Cluster{Deployments: []appsv1.Deployment{deployment(ns, "ghcr.io/eraser-dev/eraser-manager:v1.4.1", func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{"meta.helm.sh/release-name": "eraser"}
		})}}, want: []short{{"difference", "manager", "deployment/eraser-system/eraser-controller-manager", "upstream Eraser v1.4.1 (Helm release eraser) runs here"}}},
		"upstream's static manifest, mirrored": {cluster: Cluster{Deployments: []appsv1.Deployment{deployment(ns, "mirror.example.com/eraser/eraser-manager:v1.3.0", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Command = []string{"/manager"}
		})}}, want: []short{{"difference", "manager", "deployment/eraser-system/eraser-controller-manager", "upstream Eraser v1.3.0 runs here"}}},
		"the AKS add-on": {cluster: Cluster{
			Deployments: []appsv1.Deployment{deployment("kube-system", "mcr.microsoft.com/oss/eraser/eraser-manager:v1.3.1")},
			CRDs:        []apiextensionsv1.CustomResourceDefinition{{ObjectMeta: metav1.ObjectMeta{Name: "imagelists.eraser.sh", Labels: map[string]string{"addonmanager.kubernetes.io/mode": "Reconcile"}}}},
		}, want: []short{
			{"BLOCKING", "manager", "customresourcedefinition/imagelists.eraser.sh", "az aks update --disable-image-cleaner"},
			{"BLOCKING", "manager", "deployment/kube-system/eraser-controller-manager", "the AKS Image Cleaner add-on v1.3.1: two managers"},
		}},
		"another install of this chart": {cluster: Cluster{Deployments: []appsv1.Deployment{deployment("team-b", "ghcr.io/eraser-oss/eraser-manager:v0.1.0")}},
			want: []short{{"BLOCKING", "manager", "deployment/team-b/eraser-controller-manager", "keep one install per cluster"}}},
		"another manager scaled to zero": {cluster: Cluster{Deployments: []appsv1.Deployment{deployment("team-b", "ghcr.io/eraser-dev/eraser-manager:v1.4.1", func(d *appsv1.Deployment) {
			d.Spec.Replicas = new(int32)
		})}}},
		"a Deployment that is no manager": {cluster: Cluster{Deployments: []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: "nginx:1"}}}}}}}}},
		"upstream's configuration": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{configMap(config.ConfigMapName, nil, map[string]string{config.ConfigKey: upstreamConfig})}},
			want: []short{
				{"difference", "configuration", "configmap/eraser-system/eraser-manager-config", "type include (selectors team=a, and the label eraser.sh/cleanup.filter"},
				{"difference", "configuration", "configmap/eraser-system/eraser-manager-config", "deleteFailedImages"},
				{"difference", "configuration", "configmap/eraser-system/eraser-manager-config", "minAge (10m0s)"},
			}},
		"upstream's worker sizes": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{configMap(config.ConfigMapName, nil, map[string]string{config.ConfigKey: sizesConfig("{request: {mem: 500Mi, cpu: 1000m}}", "eraser", "{limit: {mem: 30Mi, cpu: 0}}")})}},
			want: []short{
				{"difference", "configuration", "configmap/eraser-system/eraser-manager-config", "components.scanner.request (cpu 1000m, mem 500Mi) is upstream's default"},
				{"difference", "configuration", "configmap/eraser-system/eraser-manager-config", "limit.mem 30Mi is upstream's default"},
			}},
		"upstream's scanner request, as one CPU": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{configMap(config.ConfigMapName, nil, map[string]string{config.ConfigKey: sizesConfig("{request: {mem: 500Mi, cpu: 1}}", "remover", "{}")})}},
			want: []short{{"difference", "configuration", "configmap/eraser-system/eraser-manager-config", "(cpu 100m, mem 256Mi) instead"}}},
		"sizes of the operator's own": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{configMap(config.ConfigMapName, nil, map[string]string{config.ConfigKey: sizesConfig("{request: {mem: 500Mi, cpu: 500m}}", "remover", "{limit: {mem: 40Mi}}")})}}},
		"a configuration refused": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{configMap(config.ConfigMapName, nil, map[string]string{config.ConfigKey: "manager: {nodeFilter: {selector: [a]}}"})}},
			want: []short{{"BLOCKING", "configuration", "configmap/eraser-system/eraser-manager-config", "held back"}}},
		"legacy exclusions": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{exclusions("legacy", `{"Excluded":["nginx:1.*"]}`), exclusions("fine", `{"excluded":["quay.io/*"]}`)}},
			want: []short{
				{"difference", "exclusions", "configmap/eraser-system/legacy", `"Excluded": read as "excluded"`},
				{"difference", "exclusions", "configmap/eraser-system/legacy", `"nginx:1.*": read as a glob`},
			}},
		"an exclusion list every worker fails on": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{exclusions("broken", `[]`)}},
			want: []short{{"BLOCKING", "exclusions", "configmap/eraser-system/broken", "removes nothing"}}},
		"an exclusion list elsewhere": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{func() corev1.ConfigMap {
			cm := exclusions("elsewhere", `[]`)
			cm.Namespace = "other"
			return cm
		}()}}},
		"image lists": {cluster: Cluster{ImageLists: []eraserv1.ImageList{imageList("imagelist", false, "*"), imageList("team-a", false, "nginx:1")}},
			want: []short{
				{"difference", "imagelist", "imagelist/imagelist", "keeps images pulled less than"},
				{"difference", "imagelist", "imagelist/team-a", "upstream ignored every ImageList not named imagelist"},
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.cluster.Namespace = ns
			match(t, Check(tc.cluster), tc.want)
		})
	}
}

func TestRollback(t *testing.T) {
	cases := map[string]struct {
		cluster   Cluster
		want      []short
		wantApply []string
	}{
		"nothing": {},
		"imagelist a dry run": {cluster: Cluster{ImageLists: []eraserv1.ImageList{imageList("imagelist", true, "*")}},
			want:      []short{{"BLOCKING", "rollback", "imagelist/imagelist", "removed for real"}},
			wantApply: []string{"imagelist"}},
		"imagelist for real, *": {cluster: Cluster{ImageLists: []eraserv1.ImageList{imageList("imagelist", false, "*")}},
			want: []short{{"difference", "rollback", "imagelist/imagelist", "with none of this Eraser's retention"}}},
		"another list a dry run": {cluster: Cluster{ImageLists: []eraserv1.ImageList{imageList("team-a", true, "a:1")}},
			want: []short{{"difference", "rollback", "imagelist/team-a", "upstream ignores this name"}}},
		"jobs and reports": {cluster: Cluster{ImageJobs: 3, Reports: 5},
			want: []short{{"difference", "rollback", "imagejobs", "deletes every ImageJob when its scheduled runs start (3 here), and the garbage collector their 5 report"}}},
		"paused": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{configMap("eraser-pause", nil, nil)}},
			want: []short{{"difference", "rollback", "configmap/eraser-system/eraser-pause", "ignores the pause"}}},
		"globs protect nothing upstream": {cluster: Cluster{ConfigMaps: []corev1.ConfigMap{exclusions("l", `{"excluded":["nginx:1.*","Text","*"]}`)}},
			want: []short{
				{"difference", "rollback", "configmap/eraser-system/l", `"nginx:1.*" protects nothing under upstream`},
				{"difference", "rollback", "configmap/eraser-system/l", `"*" protects nothing under upstream`},
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.cluster.Namespace = ns
			got, apply := Rollback(tc.cluster)
			match(t, got, tc.want)
			var names []string
			for _, a := range apply {
				names = append(names, a.ImageList)
			}
			if diff := cmp.Diff(tc.wantApply, names); diff != "" {
				t.Errorf("neutralised (-want +got):\n%s", diff)
			}
		})
	}
}
