package render

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/schedule"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/testing/wait"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// refusals records every request the API server refused for lack of
// permission.
type refusals struct {
	mu   sync.Mutex
	list []string
}

func (r *refusals) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			r.mu.Lock()
			r.list = append(r.list, req.Method+" "+req.URL.Path)
			r.mu.Unlock()
		}
		return resp, err
	})
}

func (r *refusals) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.list...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// The manager, as its ServiceAccount with exactly the shipped RBAC, on a
// control plane that enforces owner-reference permissions, runs an ImageList
// job and a scheduled run to the end (the test plays the kubelet): leader
// election, the schedule's state, job data, pods, status, events and cleanup
// are all allowed, and nothing is refused; then a run-now request on the
// ImageList, consumed and run.
func TestManagerRunsWithShippedRBAC(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	objs := staticManifest(t)
	apply(t, objs, false)

	// The config the Deployment mounts, so that the ConfigMap the manager
	// watches agrees with the file it started with.
	shipped := get[corev1.ConfigMap](t, objs, "ConfigMap", config.ConfigMapName)
	// Finished jobs go with their pods here (keepReportFor 0s), so that
	// the job's own deletion is exercised with the shipped RBAC too.
	doc := strings.Replace(shipped.Data[config.ConfigKey], "keepReportFor: 24h", "keepReportFor: 0s", 1)
	if doc == shipped.Data[config.ConfigKey] {
		t.Fatal("the shipped configuration no longer sets keepReportFor")
	}
	live := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(shipped), live); err != nil {
		t.Fatal(err)
	}
	live.Data[config.ConfigKey] = doc
	if err := env.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), config.ConfigKey)
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	log := manager.NewLogger("info", logs)
	store, err := eraserconfig.Load(log, eraserconfig.Source{File: file})
	if err != nil {
		t.Fatal(err)
	}

	sa := "system:serviceaccount:" + DefaultNamespace + ":eraser-controller-manager"
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa, Groups: []string{
		"system:serviceaccounts", "system:serviceaccounts:" + DefaultNamespace, "system:authenticated",
	}}
	denied := &refusals{}
	cfg.Wrap(denied.wrap)

	runCtx, cancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = manager.Run(runCtx, log, cfg, manager.Options{
			ConfigFile: file, LogLevel: "info", MetricsAddr: "0", ProbeAddr: "0", LeaderElect: true,
			Namespace: DefaultNamespace, ConfigMapName: config.ConfigMapName,
		}, store)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			t.Errorf("manager: %v", runErr)
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", logs.String())
		}
	})

	node := builder.MakeNode("rbac-node").Obj()
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	list := builder.MakeImageList("rbac").Images("docker.io/library/alpine:3.7.3").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, list)
		_ = env.Client.Delete(ctx, node)
	})

	// step plays the kubelet once and reads the list and the number of
	// jobs left; a refusal of the manager ends the wait.
	step := func(list *eraserv1.ImageList) (int, error) {
		if d := denied.get(); len(d) > 0 {
			return 0, errors.New("refused")
		}
		if err := finishPods(ctx); err != nil {
			return 0, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(list), list); err != nil {
			return 0, err
		}
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(ctx, &jobs); err != nil {
			return 0, err
		}
		return len(jobs.Items), nil
	}
	err = wait.Until(time.Minute, func() (bool, error) {
		select {
		case <-exited:
			return false, errors.New("the manager stopped")
		default:
		}
		jobs, err := step(list)
		if err != nil {
			return false, err
		}
		state := &corev1.ConfigMap{}
		err = env.Client.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: schedule.StateName}, state)
		if client.IgnoreNotFound(err) != nil {
			return false, err
		}
		// both jobs ran, were recorded and were cleaned up
		return list.Status.Timestamp != nil && list.Status.Success == 1 && err == nil && jobs == 0, nil
	})
	if d := denied.get(); len(d) > 0 {
		t.Fatalf("the API server refused the manager: %q", d)
	}
	if err != nil {
		t.Fatalf("jobs did not finish: %v (ImageList status %+v)", err, list.Status)
	}
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, e := range events.Items {
		recorded = recorded || (e.InvolvedObject.Kind == "ImageList" && e.InvolvedObject.Name == list.Name)
	}
	if !recorded {
		t.Error("no event recorded on the ImageList")
	}

	// Run-now: the manager removes the annotation (a patch) and reruns the
	// list to its cleanup.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(list), list); err != nil {
		t.Fatal(err)
	}
	before := list.Status.Timestamp.DeepCopy()
	time.Sleep(time.Second) // the re-run's completion time, to the second, is after the first's
	patch := []byte(`{"metadata":{"annotations":{"` + eraserv1.AnnotationRunNow + `":"true"}}}`)
	if err := env.Client.Patch(ctx, list, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	err = wait.Until(time.Minute, func() (bool, error) {
		jobs, err := step(list)
		if err != nil {
			return false, err
		}
		_, requested := list.Annotations[eraserv1.AnnotationRunNow]
		return !requested && list.Status.Timestamp.After(before.Time) && jobs == 0, nil
	})
	if d := denied.get(); len(d) > 0 {
		t.Fatalf("the API server refused the manager on run-now: %q", d)
	}
	if err != nil {
		t.Fatalf("run-now did not run: %v (ImageList %v, status %+v)", err, list.Annotations, list.Status)
	}
}

// finishPods plays the kubelet: every worker pod succeeds, each container
// leaving an empty summary.
func finishPods(ctx context.Context) error {
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(DefaultNamespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase == corev1.PodSucceeded || pod.DeletionTimestamp != nil {
			continue
		}
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			summary := workerresult.Summary{Component: c.Name, Node: pod.Spec.NodeName, Counts: map[string]int{}}
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: string(summary.Encode())}},
			})
		}
		if err := env.Client.Status().Update(ctx, pod); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
