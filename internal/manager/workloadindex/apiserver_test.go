package workloadindex

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/testing/wait"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

const (
	webDigest = "docker.io/library/web@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	waitLong  = 2 * time.Minute
)

// startIndex runs an index against the test API server until the test
// ends and waits until it has synced.
func startIndex(t *testing.T, listOnly bool, page int64) *Index {
	t.Helper()
	idx, err := New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	idx.listOnly, idx.pageSize = listOnly, page
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- idx.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	testenv.WaitFor(t, waitLong, "the index to sync", idx.Synced)
	return idx
}

// waitSets polls until the cluster set and the nodes' sets are as wanted,
// then compares them, so that a failure shows the difference.
func waitSets(t *testing.T, idx *Index, cluster []references.Ref, nodes map[string][]references.Ref) {
	t.Helper()
	same := func() bool {
		got, ok := idx.Cluster()
		if !ok || !cmp.Equal(cluster, got) {
			return false
		}
		for n, want := range nodes {
			if !cmp.Equal(want, idx.Node(n)) {
				return false
			}
		}
		return true
	}
	// A timeout is not the failure: the diffs below say what differs.
	_ = wait.Until(waitLong, func() (bool, error) { return same(), nil })
	got, _ := idx.Cluster()
	if diff := cmp.Diff(cluster, got); diff != "" {
		t.Errorf("Cluster() (-want +got):\n%s", diff)
	}
	for n, want := range nodes {
		if diff := cmp.Diff(want, idx.Node(n)); diff != "" {
			t.Errorf("Node(%s) (-want +got):\n%s", n, diff)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAgainstAPIServer(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	must(t, err)
	const ns = "refs"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	pods := cs.CoreV1().Pods(ns)
	create := func(p *corev1.Pod) *corev1.Pod {
		t.Helper()
		out, err := pods.Create(ctx, p, metav1.CreateOptions{})
		must(t, err)
		return out
	}
	setStatus := func(p *corev1.Pod, phase corev1.PodPhase, statuses ...corev1.ContainerStatus) {
		t.Helper()
		p.Status.Phase, p.Status.ContainerStatuses = phase, statuses
		_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		must(t, err)
	}

	// Running on n1, its status naming the image by digest.
	web0 := create(makePod(ns, "web-0").node("n1").init("init:1").containers("web:1").obj())
	setStatus(web0, corev1.PodRunning, corev1.ContainerStatus{Name: "ca", Image: "docker.io/library/web:1", ImageID: webDigest})
	// On n1 with an ephemeral debug container added.
	debug := create(makePod(ns, "debugged").node("n1").containers("app:1").obj())
	debug.Spec.EphemeralContainers = makePod("", "").ephemeral("debug:1").obj().Spec.EphemeralContainers
	_, err = pods.UpdateEphemeralContainers(ctx, debug.Name, debug, metav1.UpdateOptions{})
	must(t, err)
	// Finished on n1: not referenced.
	setStatus(create(makePod(ns, "done").node("n1").containers("old:1").obj()), corev1.PodSucceeded)
	create(makePod(ns, "web-1").node("n2").containers("web:1").obj())
	create(makePod(ns, "queued").containers("queued:1").obj())
	// An eraser worker pod on n2: the API server does not send it.
	create(makePod(ns, "worker").node("n2").label(podspec.LabelJob, "j").containers("remover:1").obj())

	apps, batch := cs.AppsV1(), cs.BatchV1()
	_, err = apps.Deployments(ns).Create(ctx, makeDeployment(ns, "web", 0, []string{"migrate:1"}, "web:1"), metav1.CreateOptions{})
	must(t, err)
	_, err = apps.ReplicaSets(ns).Create(ctx, makeReplicaSet(ns, "web-old", 0, "web:0"), metav1.CreateOptions{})
	must(t, err)
	_, err = apps.StatefulSets(ns).Create(ctx, makeStatefulSet(ns, "db", 0, "db:5"), metav1.CreateOptions{})
	must(t, err)
	_, err = apps.DaemonSets(ns).Create(ctx, makeDaemonSet(ns, "agent", "agent:3"), metav1.CreateOptions{})
	must(t, err)
	_, err = batch.CronJobs(ns).Create(ctx, makeCronJob(ns, "backup", true, "backup:1"), metav1.CreateOptions{})
	must(t, err)
	_, err = batch.Jobs(ns).Create(ctx, makeJob(ns, "running", "batch:1"), metav1.CreateOptions{})
	must(t, err)
	completeJob(t, cs, ns, makeJob(ns, "complete", "batch:0"))

	nodes := map[string][]references.Ref{
		"n1": refs("app:1", "Pod refs/debugged", "debug:1", "Pod refs/debugged", "docker.io/library/web:1", "Pod refs/web-0",
			webDigest, "Pod refs/web-0", "init:1", "Pod refs/web-0", "web:1", "Pod refs/web-0"),
		"n2": refs("web:1", "Pod refs/web-1"),
		"n3": nil,
	}
	cluster := refs("agent:3", "DaemonSet refs/agent", "backup:1", "CronJob refs/backup", "batch:1", "Job refs/running",
		"db:5", "StatefulSet refs/db", "migrate:1", "Deployment refs/web", "queued:1", "Pod refs/queued", "web:1", "Deployment refs/web")

	streamed := startIndex(t, false, pageSize)
	listed := startIndex(t, true, 2)
	for name, idx := range map[string]*Index{"streamed": streamed, "listed in pages of 2": listed} {
		t.Run(name, func(t *testing.T) { waitSets(t, idx, cluster, nodes) })
	}
	// The initial state came as a stream, not a list; the list path paged
	// (5 pods in 3 pages, the worker not among them; a page for each other
	// kind).
	if s := streamed.Stats(); s.Lists != 0 || s.Streams < int64(numKinds) {
		t.Errorf("streamed index: %d lists, %d streams; want 0 lists and a stream per kind", s.Lists, s.Streams)
	}
	if s := listed.Stats(); s.Lists < int64(numKinds) || s.Pages < 3+int64(numKinds-1) {
		t.Errorf("listed index: %d lists in %d pages; want one per kind, pods in pages of 2", s.Lists, s.Pages)
	}

	// Changes: web-0 finishes, the deployment's image moves on, the cron
	// job and the unscheduled pod go, a new pod is bound to n3.
	web0, err = pods.Get(ctx, "web-0", metav1.GetOptions{})
	must(t, err)
	setStatus(web0, corev1.PodFailed)
	d, err := apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	must(t, err)
	d.Spec.Template.Spec.Containers[0].Image = "web:2"
	_, err = apps.Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	must(t, err)
	must(t, batch.CronJobs(ns).Delete(ctx, "backup", metav1.DeleteOptions{}))
	must(t, pods.Delete(ctx, "queued", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	create(makePod(ns, "late").node("n3").containers("late:1").obj())

	nodes = map[string][]references.Ref{
		"n1": refs("app:1", "Pod refs/debugged", "debug:1", "Pod refs/debugged"),
		"n2": refs("web:1", "Pod refs/web-1"),
		"n3": refs("late:1", "Pod refs/late"),
	}
	cluster = refs("agent:3", "DaemonSet refs/agent", "batch:1", "Job refs/running", "db:5", "StatefulSet refs/db",
		"migrate:1", "Deployment refs/web", "web:2", "Deployment refs/web")
	for name, idx := range map[string]*Index{"streamed": streamed, "listed in pages of 2": listed} {
		t.Run(name+" after changes", func(t *testing.T) { waitSets(t, idx, cluster, nodes) })
	}
}

// completeJob creates a Job and records it complete, with the status the
// API server's validation asks of a finished Job.
func completeJob(t *testing.T, cs kubernetes.Interface, ns string, j *batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	j, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
	must(t, err)
	now := metav1.Now()
	j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
	for _, c := range []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete} {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue,
			LastProbeTime: now, LastTransitionTime: now})
	}
	if _, err := cs.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("completing job %s: %v", j.Name, err)
	}
}
