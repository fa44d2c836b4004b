//go:build linux && bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/schedule"
	"github.com/eraser-oss/eraser/internal/testing/benchworkload"
)

// benchNode is node i's name: benchworkload's, or with BENCH_LONG_NAMES=1
// the longest a node may have, 253 characters in four DNS labels (the
// first its own), so that every record the manager keeps per node is
// measured at its largest.
func benchNode(i int) string {
	if os.Getenv("BENCH_LONG_NAMES") == "" {
		return benchworkload.Node(i)
	}
	own := fmt.Sprintf("%s-", benchworkload.Node(i)) + strings.Repeat("x", 61)
	shared := strings.Repeat("nodepool0", 7)
	return own[:60] + "0." + shared + "." + shared + "." + shared
}

// recordSizes follows the ConfigMaps of the manager's namespace through a
// run and keeps each one's largest size as stored (protobuf, as etcd holds
// it): the records the manager keeps, deleted at cleanup, are measured
// while they exist.
type recordSizes struct {
	mu    sync.Mutex
	sizes map[string]int // by name
	kinds map[string]string
	stop  func()
}

func watchRecords(t *testing.T, cs kubernetes.Interface, ns string) *recordSizes {
	list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := retryWatch(t, list.ResourceVersion, cs.CoreV1().ConfigMaps(ns).Watch)
	r := &recordSizes{sizes: map[string]int{}, kinds: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			r.mu.Lock()
			r.sizes[cm.Name] = max(r.sizes[cm.Name], cm.Size())
			r.kinds[cm.Name] = recordKind(cm)
			r.mu.Unlock()
		}
	}()
	r.stop = func() { w.Stop(); <-done }
	return r
}

// recordKind names what a ConfigMap of the manager's is.
func recordKind(cm *corev1.ConfigMap) string {
	switch {
	case cm.Labels[eraserv1.LabelReport] != "":
		return "report shards"
	case cm.Labels[eraserv1.LabelReferences] != "":
		return "reference parts"
	case cm.Name == schedule.StateName:
		return "schedule state"
	case strings.Contains(cm.Name, "-nodes"):
		return "node list"
	case cm.Labels[eraserv1.LabelJobOwner] != "" || len(cm.OwnerReferences) > 0:
		return "job data"
	}
	return "other: " + cm.Name
}

// addObject records an object the manager writes that is not a
// ConfigMap (the ImageJob, the ImageList), at its JSON size.
func (r *recordSizes) addObject(t *testing.T, c client.Client, kind string, obj client.Object) {
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Logf("%s %s: %v", kind, obj.GetName(), err)
		return
	}
	obj.SetManagedFields(nil)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sizes[kind+"/"+obj.GetName()] = len(b)
	r.kinds[kind+"/"+obj.GetName()] = kind + " (JSON)"
}

// row is the figures for the results: bytes per node by record kind, and
// the largest single object.
func (r *recordSizes) row(nodes int) map[string]any {
	r.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	perKind, count := map[string]int{}, map[string]int{}
	largest, largestName := 0, ""
	for name, size := range r.sizes {
		perKind[r.kinds[name]] += size
		count[r.kinds[name]]++
		if size > largest {
			largest, largestName = size, name
		}
	}
	kinds := map[string]any{}
	for k, v := range perKind {
		kinds[k] = map[string]any{"bytes": v, "objects": count[k], "bytesPerNode": float64(v) / float64(nodes)}
	}
	return map[string]any{"recordsByKind": kinds, "largestRecordBytes": largest, "largestRecord": largestName}
}

// printRecords prints a run's record sizes.
func printRecords(row map[string]any) {
	kinds, _ := row["recordsByKind"].(map[string]any)
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	fmt.Printf("%-6v records the manager kept (largest single object %v bytes: %v; node names %s):\n", row["nodes"], row["largestRecordBytes"], row["largestRecord"], nameKind())
	for _, k := range names {
		v := kinds[k].(map[string]any)
		fmt.Printf("       %-20s %9v bytes in %4v object(s), %8.1f bytes a node\n", k, v["bytes"], v["objects"], v["bytesPerNode"])
	}
}

func nameKind() string {
	if os.Getenv("BENCH_LONG_NAMES") != "" {
		return "of 253 characters (BENCH_LONG_NAMES)"
	}
	return "as " + benchworkload.Node(0)
}
