package reportwriter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

var env *testenv.Env

// plugin is kubectl-eraser, built by the first test running it.
var plugin = gobuild.New("cmd/kubectl-eraser")

func TestMain(m *testing.M) {
	code := testenv.Run(m, &env)
	plugin.Remove()
	os.Exit(code)
}

const ns = "report-test"

// logs is a LogSource of canned container logs; a missing one is an error,
// as the API server answers for a pod whose node has no kubelet.
type logs map[string]string

func (l logs) Log(_ context.Context, _, pod, container string, _ int64) (io.ReadCloser, error) {
	text, ok := l[pod+"/"+container]
	if !ok {
		return nil, errors.New("no preferred addresses found")
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

func line(outcome, image, id, policy string, bytes uint64, detail string) string {
	names := []string{}
	if image != "" {
		names = append(names, image)
	}
	b, _ := json.Marshal(map[string]any{"time": "t", "level": "INFO", "msg": "image", "component": "remover",
		"outcome": outcome, "target": id, "image": id, "names": names, "policy": policy, "bytes": bytes, "detail": detail})
	return string(b) + "\n"
}

func setup(t *testing.T) context.Context {
	t.Helper()
	testenv.Require(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return ctx
}

// jobPod is the job's worker pod on node, controlled by the job as the
// manager's are.
func jobPod(job *eraserv1.ImageJob, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podspec.PodName(job.Name, node), Labels: map[string]string{podspec.LabelJob: job.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: podspec.RemoverContainer, Image: "remover"}}},
	}
}

// finishedPod is a pod of the job on node, finished with the remover's
// exit code and summary.
func finishedPod(t *testing.T, ctx context.Context, job *eraserv1.ImageJob, node string, exit int32, s workerresult.Summary) {
	t.Helper()
	pod := jobPod(job, node)
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if exit != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: string(s.Encode())}}}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func setPhase(t *testing.T, ctx context.Context, job *eraserv1.ImageJob, phase eraserv1.JobPhase, failed ...eraserv1.NodeFailure) {
	t.Helper()
	job.Status.Phase, job.Status.Desired, job.Status.FailedNodes = phase, 4, failed
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}

// TestReportFromLogs: a job with removals, kept images, failures and a node
// whose log is gone; the report holds each node's entries (or why not),
// with the counts, and kubectl eraser report prints them through the real
// kubectl.
func TestReportFromLogs(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	job := builder.MakeImageJob("rj").Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	setPhase(t, ctx, job, eraserv1.PhaseRunning)
	finishedPod(t, ctx, job, "n1", 0, workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 1, "in use": 1, "too young": 1}, BytesFreed: 100})
	finishedPod(t, ctx, job, "n2", 2, workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 1, "failed": 1}, Error: "1 of 2 removals failed"})
	// Under disk pressure: the image filesystem and how it reached its target.
	relief := &workerresult.ImageFs{CapacityBytes: 1000, UsedBeforeBytes: 900, UsedAfterBytes: 790, TargetBytes: 800, TargetReached: true, TimeToTargetMs: 12.5, FreedToTargetBytes: 110}
	finishedPod(t, ctx, job, "n3", 0, workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 4}, ImageFs: relief})
	canned := logs{
		podspec.PodName("rj", "n1") + "/remover": `{"msg":"starting"}` + "\n" +
			line("removed", "docker.io/library/nginx:1.25", "sha256:aa", "Unused", 100, "") +
			line("in use", "docker.io/library/redis:7", "sha256:bb", "", 0, "container web") +
			line("too young", "docker.io/library/busybox:1", "sha256:cc", "", 0, "pulled 2m ago"),
		podspec.PodName("rj", "n2") + "/remover": line("removed", "docker.io/library/nginx:1.25", "sha256:aa", "Unused", 100, "") +
			line("failed", "docker.io/library/alpine:3", "sha256:dd", "Unused", 0, "rpc error: image is in use by a container"),
	}
	r := NewReconciler(env.Client, env.Client, canned, clk, Options{Namespace: ns})
	pass := func() {
		t.Helper()
		clk.Step(passInterval)
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: job.Name}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if job.Status.Report != nil {
		t.Fatalf("a running job with 3 nodes read wrote its report already: %+v", job.Status.Report)
	}
	setPhase(t, ctx, job, eraserv1.PhaseCompleted, eraserv1.NodeFailure{Node: "n4", Reason: "StartTimeout", Message: "did not start within 10m"})
	pass()
	rep := job.Status.Report
	if rep == nil || !rep.Complete || rep.Nodes != 4 || len(rep.ConfigMaps) != 1 || rep.Selector != "eraser.sh/report=rj" {
		t.Fatalf("status.report %+v", rep)
	}
	// kubectl finds the shard by the status's selector.
	var shards corev1.ConfigMapList
	if err := env.Client.List(ctx, &shards, client.InNamespace(rep.Namespace), client.MatchingLabels{eraserv1.LabelReport: "rj"}); err != nil || len(shards.Items) != 1 {
		t.Fatalf("%d shards by the selector: %v", len(shards.Items), err)
	}
	nodes, err := nodereport.Read(shards.Items, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []nodereport.Node{
		{Name: "n1", Counts: map[string]int{"removed": 1, "in use": 1, "too young": 1}, BytesFreed: 100, Entries: []nodereport.Entry{
			{Image: "docker.io/library/nginx:1.25", ID: "sha256:aa", Outcome: "removed", Policy: "Unused", Bytes: 100},
			{Image: "docker.io/library/redis:7", ID: "sha256:bb", Outcome: "in use", Detail: "container web"},
			{Image: "docker.io/library/busybox:1", ID: "sha256:cc", Outcome: "too young", Detail: "pulled 2m ago"},
		}},
		{Name: "n2", Failed: true, Reason: "RemovalsFailed", Message: "container remover exited with code 2: 1 of 2 removals failed",
			Counts: map[string]int{"removed": 1, "failed": 1}, Entries: []nodereport.Entry{
				{Image: "docker.io/library/nginx:1.25", ID: "sha256:aa", Outcome: "removed", Policy: "Unused", Bytes: 100},
				{Image: "docker.io/library/alpine:3", ID: "sha256:dd", Outcome: "failed", Policy: "Unused", Detail: "rpc error: image is in use by a container"},
			}},
		{Name: "n3", Counts: map[string]int{"removed": 4}, ImageFs: relief, Entries: []nodereport.Entry{},
			Unavailable: "reading the log: remover: no preferred addresses found"},
		{Name: "n4", Failed: true, Reason: "StartTimeout", Message: "did not start within 10m", Entries: []nodereport.Entry{}, Unavailable: noPodFailed},
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// Complete: later passes read nothing more.
	pass()
	if got := job.Status.Report; len(got.ConfigMaps) != 1 {
		t.Errorf("a complete report was written again: %+v", got)
	}

	t.Run("kubectl eraser report", func(t *testing.T) { kubectlEraser(t, job.Name) })
}

// pluginRunner builds kubectl-eraser and returns a function that runs it
// through the real kubectl, as an operator would: kubectl finds
// kubectl-eraser on the PATH.
func pluginRunner(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	kubectl := testenv.Kubectl(t)
	plugin := plugin.Path(t)
	return func(args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"eraser"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.KubeconfigPath, "PATH="+filepath.Dir(plugin)+":"+os.Getenv("PATH"))
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		return out.String(), err
	}
}

// kubectlEraser runs the plugin through the real kubectl, as an operator
// would: kubectl finds kubectl-eraser on the PATH.
func kubectlEraser(t *testing.T, job string) {
	run := pluginRunner(t)
	out, err := run("report", "imagejob/"+job, "--node", "n2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	// The fields of `kubectl eraser report -o json` a script reads, as the
	// user sees them: decoded from the JSON, not the plugin's own type.
	var got struct {
		Job      string            `json:"job"`
		Complete bool              `json:"complete"`
		Nodes    []nodereport.Node `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Job != job || !got.Complete || len(got.Nodes) != 1 || got.Nodes[0].Name != "n2" || len(got.Nodes[0].Entries) != 2 {
		t.Errorf("json report %+v", got)
	}
	out, err = run("report", job)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"n1  ", "removed", "docker.io/library/nginx:1.25", "too young", "n3", "no preferred addresses found", "StartTimeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if _, err := run("report", "imagejob/"+job, "--node", "nope"); err == nil {
		t.Error("a node not in the report: exit 0")
	}
	if _, err := run("report"); err == nil {
		t.Error("no target: exit 0")
	}
}

// poolNode is one node of a realistic large cluster: ten node pools, each
// with 2,000 images (500 common to every pool, 1,500 of its own), listed in
// the same order on every node of the pool; per node a few removals, some
// young images, the rest in use or excluded, and now and then a failure.
func poolNode(i, images int) nodereport.Node {
	pool := i % 10
	n := nodereport.Node{Name: fmt.Sprintf("pool%d-node-%04d", pool, i), Counts: map[string]int{}}
	for k := range images {
		img := fmt.Sprintf("registry.example.com/pool-%d/service-%d:v1.%d", pool, k, k%7)
		if k < 500 {
			img = fmt.Sprintf("registry.example.com/common/lib-%d:v2.%d", k, k%5)
		}
		e := nodereport.Entry{Image: img, ID: fmt.Sprintf("sha256:%064x", len(img)*1000003+k), Outcome: "in use", Detail: ""}
		switch r := (k + i) % 100; {
		case r < 5:
			e.Outcome, e.Policy, e.Bytes = "removed", "Unused", uint64(50<<20+k)
		case r < 15:
			e.Outcome, e.Detail = "too young", "pulled 3m ago"
		case r < 20:
			e.Outcome = "excluded"
		case r == 99 && i%50 == 0:
			e.Outcome, e.Policy, e.Detail = "failed", "Unused", "rpc error: code = Unknown desc = image is being pulled"
		}
		n.Counts[e.Outcome]++
		n.Entries = append(n.Entries, e)
	}
	return n
}

// TestReportBoundAt5000Nodes: the report of a 5,000-node job of 2,000
// images per node, written as the collector writes it (flushes of
// flushNodes nodes, split into shards within budget) to the real API
// server: every node and entry is there, within MaxReportConfigMaps shards.
// It logs the stored size (docs/report.md quotes it).
func TestReportBoundAt5000Nodes(t *testing.T) {
	const nodes, images = 5000, 2000
	ctx := setup(t)
	job := builder.MakeImageJob("bound").Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	job.Status.Desired = nodes
	per := flushNodes(job)
	index, stored := 0, 0
	for first := 0; first < nodes; first += per {
		var batch []nodereport.Node
		for i := first; i < min(nodes, first+per); i++ {
			batch = append(batch, poolNode(i, images))
		}
		shards, err := nodereport.Split(batch, nodereport.ShardBudget)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shards {
			cm := nodereport.ConfigMap(job, ns, index, s)
			if err := env.Client.Create(ctx, cm); err != nil {
				t.Fatalf("shard %d (%d bytes): %v", index, len(s.Data), err)
			}
			index++
			stored += len(s.Data)
		}
	}
	if index > eraserv1.MaxReportConfigMaps {
		t.Errorf("%d shards, over the cap of %d", index, eraserv1.MaxReportConfigMaps)
	}
	shards, err := reportshards.Shards(ctx, env.Client, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	seen, entries := map[string]bool{}, 0
	for i := range shards {
		got, err := nodereport.Read(shards[i:i+1], nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range got {
			seen[n.Name] = true
			entries += len(n.Entries)
			if n.Omitted != 0 {
				t.Errorf("node %s: %d entries omitted", n.Name, n.Omitted)
			}
		}
	}
	if len(seen) != nodes || entries != nodes*images {
		t.Errorf("read back %d nodes, %d entries; want %d, %d", len(seen), entries, nodes, nodes*images)
	}
	t.Logf("report of %d nodes x %d images: %d shards, %.1f MiB stored (%.0f bytes per node, %d nodes per flush)",
		nodes, images, index, float64(stored)/(1<<20), float64(stored)/nodes, per)
}

// counting is a LogSource that counts its reads.
type counting struct {
	logs
	mu    sync.Mutex
	reads int
}

func (c *counting) Log(ctx context.Context, ns, pod, container string, limit int64) (io.ReadCloser, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.logs.Log(ctx, ns, pod, container, limit)
}
