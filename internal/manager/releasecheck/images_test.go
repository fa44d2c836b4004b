package releasecheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

func TestImageProblems(t *testing.T) {
	const fix = "a value helm upgrade --reuse-values kept from an earlier release? Upgrade with it unset, or use --reset-then-reuse-values"
	want := config.Image{Repo: "registry.example/eraser/eraser-manager", Tag: "1.2.4"}
	spec := func(image string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: ManagerContainer, Image: image}}}
	}
	deployment := func(image string) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec(image)}}}
	}
	pod := func(name, image string, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "eraser-system"}, Spec: spec(image)}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	workers := func(tag string) config.Config {
		c := func(name string, enabled bool) config.Component {
			return config.Component{Enabled: enabled, Image: config.Image{Repo: "registry.example/eraser/" + name, Tag: tag}}
		}
		return config.Config{Components: config.Components{Collector: c("collector", true), Scanner: c("scanner", false), Remover: c("remover", true)}}
	}
	for name, tc := range map[string]struct {
		deployment *appsv1.Deployment
		pods       []corev1.Pod
		cfg        config.Config
		want       []string
	}{
		"all the release's, a digest added and an old pod terminating": {
			deployment: deployment(want.Ref() + "@sha256:0123"),
			pods:       []corev1.Pod{pod("new", want.Ref()+"@sha256:0123", false), pod("old", "registry.example/eraser/eraser-manager:1.2.3", true)},
			cfg:        workers("1.2.4"),
		},
		"a released chart's images, each by tag and digest": {
			deployment: deployment(want.Ref() + "@sha256:0123"),
			pods:       []corev1.Pod{pod("new", want.Ref()+"@sha256:0123", false)},
			cfg:        workers("1.2.4@sha256:4567"),
		},
		"workers by the previous release's tag and digest": {
			deployment: deployment(want.Ref()),
			cfg:        workers("1.2.3@sha256:4567"),
			want: []string{
				"the collector's image is registry.example/eraser/collector:1.2.3@sha256:4567, not at the release's tag 1.2.4 (runtimeConfig.components.collector.image.tag: " + fix + ")",
				"the remover's image is registry.example/eraser/remover:1.2.3@sha256:4567, not at the release's tag 1.2.4 (runtimeConfig.components.remover.image.tag: " + fix + ")",
			},
		},
		"manager pinned to the previous release": {
			deployment: deployment("registry.example/eraser/eraser-manager:1.2.3"),
			pods:       []corev1.Pod{pod("old", "registry.example/eraser/eraser-manager:1.2.3", false)},
			cfg:        workers("1.2.4"),
			want: []string{
				"Deployment eraser-controller-manager runs registry.example/eraser/eraser-manager:1.2.3, not the release's registry.example/eraser/eraser-manager:1.2.4 (deploy.image.tag or deploy.image.repo: " + fix + ")",
				"pod old runs registry.example/eraser/eraser-manager:1.2.3, not the release's registry.example/eraser/eraser-manager:1.2.4 (the rollout has not finished: kubectl -n eraser-system rollout status deployment/eraser-controller-manager)",
			},
		},
		"workers pinned to the previous release, the disabled scanner not judged": {
			deployment: deployment(want.Ref()),
			cfg:        workers("1.2.3"),
			want: []string{
				"the collector's image is registry.example/eraser/collector:1.2.3, not at the release's tag 1.2.4 (runtimeConfig.components.collector.image.tag: " + fix + ")",
				"the remover's image is registry.example/eraser/remover:1.2.3, not at the release's tag 1.2.4 (runtimeConfig.components.remover.image.tag: " + fix + ")",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, imageProblems(want, tc.deployment, tc.pods, tc.cfg)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
