package releasecheck

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// ManagerContainer is the manager's container in its pods.
const ManagerContainer = "manager"

// Images checks that what runs is the release's: the manager's Deployment
// and every pod of it run release (a repository and tag, as the chart
// renders them), and every worker image the configuration names carries
// the release's tag. A value kept from an earlier release (helm upgrade
// --reuse-values keeps a pinned tag) would otherwise leave the old images
// running under the new chart.
func Images(ctx context.Context, c client.Reader, namespace, release string) Step {
	s := Step{Name: "the manager and its workers run the release's images"}
	want, err := config.ParseImage(release)
	if err != nil {
		s.Err = fmt.Errorf("--release-image=%s: %w", release, err)
		return s
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: DeploymentName}, d); err != nil {
		s.Err = fmt.Errorf("reading Deployment %s: %w", DeploymentName, err)
		return s
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		s.Err = fmt.Errorf("Deployment %s's selector: %w", DeploymentName, err)
		return s
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		s.Err = fmt.Errorf("listing the manager's pods: %w", err)
		return s
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: config.ConfigMapName}, cm); err != nil {
		s.Err = fmt.Errorf("reading ConfigMap %s: %w", config.ConfigMapName, err)
		return s
	}
	cfg, _, err := config.Parse([]byte(cm.Data[config.ConfigKey]))
	if err != nil {
		s.Err = fmt.Errorf("ConfigMap %s: %w", config.ConfigMapName, err)
		return s
	}
	if problems := imageProblems(want, d, pods.Items, *cfg); len(problems) > 0 {
		s.Err = errors.New(strings.Join(problems, "; "))
		return s
	}
	s.Detail = fmt.Sprintf("%s, workers at %s", want.Ref(), want.Tag)
	return s
}

// imageProblems says, one line each, what runs other than the release's
// images: the Deployment's manager, a pod of it still on another image (a
// rollout not finished), a worker image at another tag. A digest the
// Deployment adds to the reference is the same image.
func imageProblems(want config.Image, d *appsv1.Deployment, pods []corev1.Pod, cfg config.Config) []string {
	const fix = "a value helm upgrade --reuse-values kept from an earlier release? Upgrade with it unset, or use --reset-then-reuse-values"
	var problems []string
	if got, ok := containerImage(d.Spec.Template.Spec, ManagerContainer); !ok || got != want.Ref() {
		problems = append(problems, fmt.Sprintf("Deployment %s runs %s, not the release's %s (deploy.image.tag or deploy.image.repo: %s)",
			DeploymentName, got, want.Ref(), fix))
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if got, ok := containerImage(p.Spec, ManagerContainer); !ok || got != want.Ref() {
			problems = append(problems, fmt.Sprintf("pod %s runs %s, not the release's %s (the rollout has not finished: kubectl -n %s rollout status deployment/%s)",
				p.Name, got, want.Ref(), p.Namespace, DeploymentName))
		}
	}
	comps := cfg.Components
	for _, w := range []struct {
		name string
		c    config.Component
	}{{"collector", comps.Collector}, {"scanner", comps.Scanner}, {"remover", comps.Remover}} {
		if !w.c.Enabled {
			continue
		}
		// A released chart names the release's images by tag and digest
		// (tag@digest): the tag is what is checked.
		if tag, _, _ := strings.Cut(w.c.Image.Tag, "@"); tag != want.Tag {
			problems = append(problems, fmt.Sprintf("the %s's image is %s, not at the release's tag %s (runtimeConfig.components.%s.image.tag: %s)",
				w.name, w.c.Image.Ref(), want.Tag, w.name, fix))
		}
		if win := w.c.Windows.Image; win.Repo != "" && win.Tag != want.Tag {
			problems = append(problems, fmt.Sprintf("the %s's Windows image is %s, not at the release's tag %s (runtimeConfig.components.%s.windows.image.tag: %s)",
				w.name, win.Ref(), want.Tag, w.name, fix))
		}
	}
	return problems
}

// containerImage is the image of the named container, without a digest.
func containerImage(spec corev1.PodSpec, name string) (string, bool) {
	for _, c := range spec.Containers {
		if c.Name == name {
			ref, _, _ := strings.Cut(c.Image, "@")
			return ref, true
		}
	}
	return "", false
}
