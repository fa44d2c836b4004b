// Package releasecheck is `manager check`, what the chart's `helm test`
// runs in a pod: that a release works, end to end, before anyone relies on
// it. The CRDs serve every field the manager writes, the configuration in
// the ConfigMap is valid, no other Eraser manager acts on the same CRDs and
// nothing else blocks a run (package migration), the manager is ready, and
// the manager answers a
// dry-run ImageList (one that names no image a node has, so that nothing is
// removed even if dryRun were dropped).
package releasecheck

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	erasescheme "github.com/eraser-oss/eraser/api/scheme"
	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/crdcheck"
	"github.com/eraser-oss/eraser/internal/manager/migration"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Names the check reads, as the chart and the manifest create them.
const (
	DeploymentName = "eraser-controller-manager"
	// TestImage is what the dry-run list names: no registry serves it.
	TestImage = "eraser.invalid/helm-test:absent"
	// LabelTest marks the check's ImageLists.
	LabelTest = "eraser.sh/release-check"
)

// Step is one check, by name, with its outcome.
type Step struct {
	Name string
	Err  error
	// Detail says what was found when it passed.
	Detail string
}

// Run runs every check in turn and returns each outcome; it goes on after a
// failure, so that one run says everything that is wrong.
func Run(ctx context.Context, c client.Client, namespace string, answerWithin time.Duration) []Step {
	steps := []Step{crds(ctx, c, namespace), configuration(ctx, c, namespace), migrated(ctx, c, namespace), ready(ctx, c, namespace)}
	if steps[3].Err != nil {
		// No manager to answer: said at once rather than after the wait.
		return append(steps, Step{Name: "the manager answers a dry-run ImageList", Err: errors.New("not tried: the manager is not ready")})
	}
	return append(steps, answered(ctx, c, answerWithin))
}

func crds(ctx context.Context, c client.Reader, namespace string) Step {
	s := Step{Name: "the CRDs serve every field the manager writes"}
	findings, err := crdcheck.Check(ctx, c, crdcheck.Needs())
	switch {
	case err != nil:
		s.Err = err
	case len(findings) > 0:
		s.Err = errors.New(crdcheck.Message(findings, namespace))
	default:
		s.Detail = "imagelists.eraser.sh and imagejobs.eraser.sh"
	}
	return s
}

func configuration(ctx context.Context, c client.Reader, namespace string) Step {
	s := Step{Name: "the configuration is valid"}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: config.ConfigMapName}, cm); err != nil {
		s.Err = fmt.Errorf("reading ConfigMap %s: %w", config.ConfigMapName, err)
		return s
	}
	_, warnings, err := config.Parse([]byte(cm.Data[config.ConfigKey]))
	if err != nil {
		s.Err = fmt.Errorf("ConfigMap %s: %w", config.ConfigMapName, err)
		return s
	}
	s.Detail = fmt.Sprintf("ConfigMap %s, %d warnings", config.ConfigMapName, len(warnings))
	return s
}

// migrated runs the checks of kubectl eraser migrate check: what blocks
// (another Eraser manager on the same CRDs, the AKS add-on, an exclusion
// list every worker fails on) fails the step; the differences from
// upstream Eraser are listed.
func migrated(ctx context.Context, c client.Reader, namespace string) Step {
	s := Step{Name: "no other Eraser manager acts on the CRDs, and nothing blocks a run (kubectl eraser migrate check)"}
	cluster, err := migration.Load(ctx, c, namespace, false)
	if err != nil {
		s.Err = err
		return s
	}
	findings := migration.Check(cluster)
	var b strings.Builder
	_ = migration.Write(&b, findings)
	table := strings.TrimRight(b.String(), "\n")
	switch migration.Worst(findings) {
	case migration.Blocking:
		s.Err = errors.New("\n" + table)
	case migration.Difference:
		s.Detail = fmt.Sprintf("%d differences from upstream Eraser:\n%s", len(findings), table)
	default:
		s.Detail = "no differences from upstream Eraser"
	}
	return s
}

func ready(ctx context.Context, c client.Reader, namespace string) Step {
	s := Step{Name: "the manager is ready"}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: DeploymentName}, d); err != nil {
		s.Err = fmt.Errorf("reading Deployment %s: %w", DeploymentName, err)
		return s
	}
	if d.Status.ReadyReplicas < 1 {
		s.Err = fmt.Errorf("Deployment %s has no ready replica (%d of %d): kubectl -n %s describe pods -l control-plane=controller-manager says why",
			DeploymentName, d.Status.ReadyReplicas, d.Status.Replicas, namespace)
		return s
	}
	s.Detail = fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, d.Status.Replicas)
	return s
}

// answered creates a dry-run ImageList, waits for the manager to say
// anything of it in its Ready condition (a run started, queued, paused, ...),
// and deletes it.
func answered(ctx context.Context, c client.Client, within time.Duration) Step {
	s := Step{Name: "the manager answers a dry-run ImageList"}
	list := &eraserv1.ImageList{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("eraser-release-check-%d", time.Now().Unix()), Labels: map[string]string{LabelTest: "true"}},
		Spec:       eraserv1.ImageListSpec{Images: []string{TestImage}, DryRun: true},
	}
	if err := c.Create(ctx, list); err != nil {
		s.Err = fmt.Errorf("creating ImageList %s: %w", list.Name, err)
		return s
	}
	defer func() { _ = c.Delete(context.WithoutCancel(ctx), list) }()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		got := &eraserv1.ImageList{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(list), got); err == nil {
			if cond := meta.FindStatusCondition(got.Status.Conditions, eraserv1.ConditionReady); cond != nil {
				s.Detail = fmt.Sprintf("ImageList %s: %s", list.Name, cond.Reason)
				return s
			}
		}
		select {
		case <-ctx.Done():
			s.Err = fmt.Errorf("ImageList %s got no answer within %s: the manager is not running its controllers (its log says why)", list.Name, within)
			return s
		case <-time.After(time.Second):
		}
	}
}

// Main runs `manager check [--namespace NS] [--within D] [--release-image
// REPO:TAG]` and returns the
// exit code: 0 when every check passed.
func Main(ctx context.Context, args []string, out io.Writer) int {
	fs := flag.NewFlagSet("manager check", flag.ContinueOnError)
	fs.SetOutput(out)
	namespace := fs.String("namespace", "eraser-system", "the namespace Eraser runs in")
	within := fs.Duration("within", 2*time.Minute, "how long the manager has to answer the dry-run ImageList")
	releaseImage := fs.String("release-image", "", "the manager's image of the release, repository:tag; set, the manager's pods and the workers' images are checked against it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	scheme, err := erasescheme.New()
	if err == nil {
		err = apiextensionsv1.AddToScheme(scheme)
	}
	if err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	code := 0
	steps := Run(ctx, c, *namespace, *within)
	if *releaseImage != "" {
		steps = append(steps, Images(ctx, c, *namespace, *releaseImage))
	}
	for _, s := range steps {
		if s.Err != nil {
			fmt.Fprintf(out, "FAILED %s: %v\n", s.Name, s.Err)
			code = 1
			continue
		}
		fmt.Fprintf(out, "ok     %s: %s\n", s.Name, s.Detail)
	}
	return code
}
