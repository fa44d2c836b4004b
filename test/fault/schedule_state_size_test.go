package fault_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// stateCompact is the state's compact per-node record (docs/runs.md,
// Every node covered): gzip of "node cleaned tried" lines.
const stateCompact = "coverage.gz"

// objectLimit is what the API server allows a ConfigMap's values.
const objectLimit = 1 << 20

// sizeConfig runs a scheduled run at start-up and the next 15 s after it
// ends.
const sizeConfig = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
	"manager: {scheduling: {repeatInterval: 15s, beginImmediately: true}, imageJob: {cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}}\n" +
	"components: {collector: {enabled: true}, scanner: {enabled: false}}\n"

// longName is node i's 253-character name: four DNS labels, the first its
// own.
func longName(i int) string {
	own := fmt.Sprintf("state-%05d-", i) + strings.Repeat("x", 61)
	shared := strings.Repeat("nodepool0", 7)
	return own[:60] + "0." + shared + "." + shared + "." + shared
}

// TestScheduleStateAt3000LongNames: 3,000 Ready nodes with 253-character
// names, and a schedule state written by the release before the compact
// form with a catch-up record of every node (the JSON form, 800 KB). The
// scheduled run finishes on every node; recording it in the JSON form
// (every node cleaned and still tried) would take the ConfigMap past
// 1 MiB, and the refused update stopped the schedule there. Now the record
// is read, each success clears its node's catch-up record, the state is
// saved compact and under the limit, the run is marked recorded, and the
// next scheduled run is created.
func TestScheduleStateAt3000LongNames(t *testing.T) {
	s := newScenario(t, "fault-statesize", nil)
	const nodes = 3000
	s.resetScheduleState()
	names := make([]string, nodes)
	for i := range names {
		names[i] = longName(i)
	}
	if len(names[0]) != 253 {
		t.Fatalf("node name of %d characters, want 253", len(names[0]))
	}
	s.addReadyNodes(names)

	// The JSON form, as the release before wrote it after a catch-up of
	// every node an hour ago.
	tried := map[string]string{}
	for _, n := range names {
		tried[n] = strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	}
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: scheduleState}, Data: map[string]string{
		"coverageSince": time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339),
		stateCleaned:    "{}",
		stateTried:      jsonObject(tried),
	}}
	if err := env.Client.Create(s.ctx, seed); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded the state in the JSON form: %d bytes", valuesSize(seed))

	s.startManager(sizeConfig)
	var first eraserv1.ImageJob
	testenv.WaitFor(t, 5*time.Minute, "the scheduled run", func() bool {
		jobs := s.scheduledJobs()
		if len(jobs) > 0 {
			first = jobs[0]
		}
		return len(jobs) > 0
	})
	done := s.waitScheduledParallel(first.Name, 20*time.Minute)
	t.Logf("scheduled run %s: %s, desired %d, succeeded %d", done.Name, done.Status.Phase, done.Status.Desired, done.Status.Succeeded)
	if done.Status.Phase != eraserv1.PhaseCompleted || done.Status.Succeeded != nodes {
		t.Errorf("scheduled run %s with %d succeeded, want Completed on %d", done.Status.Phase, done.Status.Succeeded, nodes)
	}

	var cm corev1.ConfigMap
	var cleaned, stillTried int
	testenv.WaitFor(t, 5*time.Minute, "the state to record the run", func() bool {
		if env.Client.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: scheduleState}, &cm) != nil {
			return false
		}
		var err error
		cleaned, stillTried, err = compactCounts(cm.BinaryData[stateCompact])
		return err == nil && cleaned == nodes
	})
	t.Logf("state saved: %d bytes of values (%.1f a node), %d nodes cleaned, %d still tried, keys %v",
		valuesSize(&cm), float64(valuesSize(&cm))/nodes, cleaned, stillTried, stateKeys(&cm))
	if valuesSize(&cm) >= objectLimit {
		t.Errorf("state of %d bytes, not under the %d limit", valuesSize(&cm), objectLimit)
	}
	if stillTried != 0 || cm.Data[stateTried] != "" {
		t.Errorf("%d nodes still tried after every node succeeded (JSON form %d bytes)", stillTried, len(cm.Data[stateTried]))
	}

	testenv.WaitFor(t, 5*time.Minute, "the run to be marked recorded", func() bool {
		var j eraserv1.ImageJob
		return env.Client.Get(s.ctx, client.ObjectKey{Name: done.Name}, &j) == nil && j.Annotations[eraserv1.AnnotationRecorded] == "true"
	})
	var next eraserv1.ImageJob
	testenv.WaitFor(t, 10*time.Minute, "the next scheduled run", func() bool {
		for _, j := range s.scheduledJobs() {
			if j.Name != done.Name && !catchUpOf(&j) {
				next = j
				return true
			}
		}
		return false
	})
	t.Logf("next scheduled run %s created", next.Name)
}

// addReadyNodes creates Ready nodes of those names, a few at a time, and
// deletes them at the end likewise.
func (s *scenario) addReadyNodes(names []string) {
	s.t.Helper()
	var failed atomic.Int32
	var firstErr atomic.Value
	parallel.For(8, len(names), func(i int) {
		n := builder.MakeNode(names[i]).Obj()
		err := env.Client.Create(s.ctx, n)
		if err == nil {
			now := metav1.Now()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: now, LastTransitionTime: now, Reason: "FaultTier"}}
			err = env.Client.Status().Update(s.ctx, n)
		}
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	})
	s.t.Cleanup(func() {
		parallel.For(8, len(names), func(i int) {
			_ = env.Client.Delete(s.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i]}})
		})
	})
	if failed.Load() > 0 {
		s.t.Fatalf("%d of %d nodes not created Ready: %v", failed.Load(), len(names), firstErr.Load())
	}
}

// waitScheduledParallel is waitScheduled with the kubelet's status writes
// a few at a time: thousands of pods.
func (s *scenario) waitScheduledParallel(name string, timeout time.Duration) eraserv1.ImageJob {
	s.t.Helper()
	return s.waitScheduledWith(name, timeout, func(job types.UID) {
		var pending []corev1.Pod
		for _, p := range s.podsOf(job) {
			if p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil {
				pending = append(pending, p)
			}
		}
		parallel.For(8, len(pending), func(i int) {
			succeed(s, &pending[i])
		})
	})
}

// succeed writes the pod's success as its kubelet does (kubeletPods);
// errors are left for the next round.
func succeed(s *scenario, p *corev1.Pod) {
	sum := workerresult.Summary{Component: "remover", Node: p.Spec.NodeName, Counts: map[string]int{"removed": 1}, BytesFreed: 1000}
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: string(sum.Encode())}}}}
	_ = env.Client.Status().Update(s.ctx, p)
}

// compactCounts reads the compact record: the nodes with a clean-up, and
// those with a catch-up record.
func compactCounts(z []byte) (cleaned, tried int, err error) {
	if z == nil {
		return 0, 0, fmt.Errorf("no %s", stateCompact)
	}
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return 0, 0, err
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return 0, 0, fmt.Errorf("line %q", line)
		}
		if f[1] != "-" {
			cleaned++
		}
		if f[2] != "-" {
			tried++
		}
	}
	return cleaned, tried, nil
}

func jsonObject(m map[string]string) string {
	var b strings.Builder
	b.WriteByte('{')
	for k, v := range m {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(k) + ":" + v)
	}
	b.WriteByte('}')
	return b.String()
}

func valuesSize(cm *corev1.ConfigMap) int {
	n := 0
	for _, v := range cm.Data {
		n += len(v)
	}
	for _, v := range cm.BinaryData {
		n += len(v)
	}
	return n
}

func stateKeys(cm *corev1.ConfigMap) []string {
	var out []string
	for k := range cm.Data {
		out = append(out, k)
	}
	for k := range cm.BinaryData {
		out = append(out, k+" (binary)")
	}
	return out
}
