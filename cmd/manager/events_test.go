package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

const eventsNS = "eraser-events"

// guideEventsCommand is how docs/troubleshooting.md tells users to find the
// manager's Events; the test runs it as written there.
const guideEventsCommand = "kubectl get events -A --field-selector source=eraser-manager"

// TestEventsThroughKubectl: every object the manager emits Events on shows
// them in `kubectl describe`, and the troubleshooting guide's command lists
// them all, whichever namespace the API server filed them in. Run with the
// kubectl built alongside the control plane, as a user would.
func TestEventsThroughKubectl(t *testing.T) {
	testenv.Require(t)
	kubectlBin := testenv.Kubectl(t)
	ctx := context.Background()
	ensureNamespace(t, eventsNS)
	node := builder.MakeNode("events-a").Obj()
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
	// The finished job is kept, to be described.
	doc := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager:\n  imageJob:\n    cleanup: {delayOnSuccess: 1h}\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: eventsNS, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: doc}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	managerIn(eventsNS).Start(t, doc)

	list := builder.MakeImageList("events-list").Images("docker.io/library/alpine:3.7.3").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	// Registered after the manager's cleanup, so run before it: the other
	// tests' managers must find neither the list nor its kept job.
	t.Cleanup(func() { removeListAndJobs(t, ctx, list) })
	testenv.WaitFor(t, 60*time.Second, "the list's run", func() bool {
		kubeletIn(t, ctx, eventsNS)
		got := &eraserv1.ImageList{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(list), got) == nil && got.Status.ObservedGeneration == 1
	})
	var jobs eraserv1.ImageJobList
	if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: list.Name}); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("the list's jobs: %d, %v", len(jobs.Items), err)
	}
	job := jobs.Items[0].Name

	cm.Data[config.ConfigKey] = "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {successRatio: 7}}\n"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}

	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig=" + env.KubeconfigPath}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	described := map[string]struct {
		args []string
		want []string
	}{
		"ImageList": {args: []string{"describe", "imagelist", list.Name}, want: []string{"JobCreated", "JobCompleted"}},
		"ImageJob":  {args: []string{"describe", "imagejob", job}, want: []string{"Started", "Completed", "1 of 1 nodes succeeded"}},
		"ConfigMap": {args: []string{"describe", "configmap", "-n", eventsNS, config.ConfigMapName},
			want: []string{"InvalidConfig", "manager.imageJob.successRatio"}},
	}
	for kind, tc := range described {
		var out string
		// Events are sent asynchronously by the recorder.
		testenv.WaitFor(t, 30*time.Second, "the "+kind+"'s Events in kubectl describe", func() bool {
			out = kubectl(tc.args...)
			return containsAll(out, tc.want)
		})
		if !strings.Contains(out, "eraser-manager") {
			t.Errorf("kubectl describe %s does not name eraser-manager as the Events' source:\n%s", kind, out)
		}
	}

	guide, err := os.ReadFile(filepath.Join(repo.Root(), "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), guideEventsCommand) {
		t.Fatalf("docs/troubleshooting.md no longer gives %q", guideEventsCommand)
	}
	out := kubectl(strings.Fields(guideEventsCommand)[1:]...)
	for _, want := range []string{"imagelist/" + list.Name, "imagejob/" + job, "configmap/" + config.ConfigMapName,
		"JobCreated", "JobCompleted", "Started", "Completed", "InvalidConfig", "default", eventsNS} {
		if !strings.Contains(out, want) {
			t.Errorf("%q does not list %q:\n%s", guideEventsCommand, want, out)
		}
	}
	// The guide's narrower selectors: one object, and the warnings.
	one := kubectl("get", "events", "-A", "--field-selector", "source=eraser-manager,involvedObject.name="+job)
	if !strings.Contains(one, "imagejob/"+job) || strings.Contains(one, "imagelist/") || strings.Contains(one, "configmap/") {
		t.Errorf("the one-object selector listed:\n%s", one)
	}
	warnings := kubectl("get", "events", "-A", "--field-selector", "source=eraser-manager,type=Warning")
	if !strings.Contains(warnings, "InvalidConfig") || strings.Contains(warnings, "Normal") {
		t.Errorf("the warnings selector listed:\n%s", warnings)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// removeListAndJobs deletes an ImageList and its jobs and waits until they
// are gone (the test API server has no garbage collector).
func removeListAndJobs(t *testing.T, ctx context.Context, list *eraserv1.ImageList) {
	t.Helper()
	_ = env.Client.Delete(ctx, list)
	var jobs eraserv1.ImageJobList
	_ = env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: list.Name})
	for i := range jobs.Items {
		_ = env.Client.Delete(ctx, &jobs.Items[i])
	}
	testenv.WaitFor(t, 30*time.Second, "the list and its jobs to be deleted", func() bool {
		var left eraserv1.ImageJobList
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(list), &eraserv1.ImageList{})
		return apierrors.IsNotFound(err) && env.Client.List(ctx, &left, client.MatchingLabels{eraserv1.LabelImageList: list.Name}) == nil &&
			len(left.Items) == 0
	})
}
