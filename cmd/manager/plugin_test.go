package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/cli/plugin"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// pluginBin is kubectl-eraser, built by the first test running it.
var pluginBin = gobuild.New("cmd/kubectl-eraser")

// Scheduled runs on, none at start, a day apart: the schedule's run in this
// test is the one `kubectl eraser run schedule` asks for.
const pluginConfig = `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  imageJob:
    cleanup: {delayOnSuccess: 0s}
  scheduling: {repeatInterval: 24h, beginImmediately: false}
components:
  collector: {enabled: true}
  scanner: {enabled: false}
`

// kubectlEraser runs `kubectl eraser <args>` as a user does: the real
// kubectl, finding the plugin on its PATH.
func kubectlEraser(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Kubectl(t), append([]string{"eraser"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.KubeconfigPath,
		"PATH="+filepath.Dir(pluginBin.Path(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl eraser %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("$ kubectl eraser %s (exit %d)\n%s", strings.Join(args, " "), code, out.String())
	return out.String(), code
}

// TestPluginDayToDay drives the real manager binary with the kubectl plugin
// through real kubectl: status, pause with a run-now request held, resume,
// a scheduled run asked for, a plan (a dry run of "*") that cleans up after
// itself, and a configuration checked before it lands.
func TestPluginDayToDay(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns = "eraser-plugin"
	ensureNamespace(t, ns)
	for _, n := range []string{"plugin-a", "plugin-b"} {
		node := builder.MakeNode(n).Obj()
		if err := env.Client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: pluginConfig}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	deleteScheduledJobs(t) // registered first, so run after the manager stops
	managerIn(ns).Start(t, pluginConfig)
	// The kubelet, played until the test ends: every worker pod succeeds.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				kubeletIn(t, ctx, ns)
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })

	list := builder.MakeImageList("plugin-list").Images("docker.io/library/alpine:3.7.3").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, list) })
	testenv.WaitFor(t, time.Minute, "the list's first run", func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(list), list) == nil && list.Status.Timestamp != nil
	})
	out, code := kubectlEraser(t, "status", "-n", ns)
	for _, want := range []string{"running", "plugin-list", eraserv1.ReasonSucceeded, "Schedule: every 24h0m0s", "scanner off"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status (exit %d) lacks %q", code, want)
		}
	}

	if _, code := kubectlEraser(t, "pause", "-n", ns, "--reason", "change freeze"); code != 0 {
		t.Fatalf("pause: exit %d", code)
	}
	if out, _ := kubectlEraser(t, "pause", "-n", ns); !strings.Contains(out, "already paused") {
		t.Errorf("a second pause: %q", out)
	}
	if _, code := kubectlEraser(t, "run", "imagelist/plugin-list"); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	testenv.WaitFor(t, time.Minute, "the run-now request to be held", func() bool {
		out, _ := kubectlEraser(t, "status", "-n", ns)
		return strings.Contains(out, "PAUSED") && strings.Contains(out, "change freeze") && strings.Contains(out, "Paused (run-now requested)")
	})
	jobsOf := func() int {
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: list.Name}); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, j := range jobs.Items {
			if metav1.IsControlledBy(&j, list) {
				n++
			}
		}
		return n
	}
	firstRuns := jobsOf()
	if _, code := kubectlEraser(t, "resume", "-n", ns); code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	testenv.WaitFor(t, time.Minute, "the held run-now to run after the resume", func() bool {
		l := &eraserv1.ImageList{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(list), l) == nil && l.Annotations[eraserv1.AnnotationRunNow] == "" &&
			(jobsOf() > firstRuns || l.Status.Timestamp.After(list.Status.Timestamp.Time))
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pause.Name}, &corev1.ConfigMap{}); err == nil {
		t.Error("the pause switch is still there after resume")
	}

	if _, code := kubectlEraser(t, "run", "schedule", "-n", ns); code != 0 {
		t.Fatalf("run schedule: exit %d", code)
	}
	testenv.WaitFor(t, time.Minute, "the scheduled run asked for", func() bool {
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
			return false
		}
		for _, j := range jobs.Items {
			if strings.HasPrefix(j.Name, "imagejob-scheduled-now-") {
				return true
			}
		}
		return false
	})

	out, code = kubectlEraser(t, "plan", "-n", ns, "--timeout", "3m")
	if code != 0 || !strings.Contains(out, `A run of "*" now would remove`) {
		t.Errorf("plan: exit %d", code)
	}
	var lists eraserv1.ImageListList
	if err := env.Client.List(ctx, &lists, client.HasLabels{plugin.LabelPlan}); err != nil {
		t.Fatal(err)
	}
	for _, l := range lists.Items {
		if l.DeletionTimestamp.IsZero() {
			t.Errorf("the plan's dry-run ImageList %s was left behind", l.Name)
		}
	}

	bad := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(bad, []byte("runtimeConfig:\n  manager:\n    scheduling: {repeatIntervall: 1h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := kubectlEraser(t, "config", "check", "-f", bad); code != 1 || !strings.Contains(out, "repeatIntervall") {
		t.Errorf("config check of a typo: exit %d, want 1 naming the key", code)
	}
}
