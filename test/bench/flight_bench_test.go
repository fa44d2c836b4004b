//go:build linux && bench

package bench

// What the queue benchmark counts beside time: worker pods in flight (the
// cluster's and each node's) from a pod watch, and the writes the API
// server answered, by resource, from its own metrics.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// flight follows pods through a watch of their namespace. A pod is in
// flight from its creation until it finished (Succeeded or Failed) or went:
// what the manager's queue counts as a node's worker. The watch's events
// come in the API server's order, so a node's count is never made up of a
// finish and a creation seen out of turn.
type flight struct {
	mu         sync.Mutex
	start      time.Time
	unfinished map[string]bool   // by pod name: in flight now
	node       map[string]string // by pod name
	ended      map[string]bool   // by pod name: seen finished
	perNode    map[string]int    // pods in flight by node
	created    map[string]int    // pods ever created by node
	// lastEnd is when each node's last pod finished, and handoffs the
	// times from a node's pod finishing to the node's next pod.
	lastEnd  map[string]time.Duration
	handoffs []float64
	// byJob are the times, from start, of each job's pod creations and
	// successes.
	byJob map[string]*jobTimes
	// seq are the jobs of each node's pods, in the order they were created.
	seq         map[string][]string
	inFlight    int
	peak        int
	peakPerNode int
	// doubled names the first nodes seen with two pods in flight, and
	// those pods' jobs.
	doubled               []string
	succeeded, failed     int
	firstPod, lastSuccess time.Duration
}

func newFlight(start time.Time) *flight {
	return &flight{start: start, unfinished: map[string]bool{}, node: map[string]string{}, ended: map[string]bool{},
		perNode: map[string]int{}, created: map[string]int{}, lastEnd: map[string]time.Duration{}, byJob: map[string]*jobTimes{}, seq: map[string][]string{}}
}

// observe applies one watch event and returns the pod when this event is
// the one that saw it succeed.
func (f *flight) observe(ev watch.Event) *corev1.Pod {
	pod, _ := ev.Object.(*corev1.Pod)
	if pod == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	name, node := pod.Name, pod.Spec.NodeName
	if _, known := f.node[name]; !known && ev.Type != watch.Deleted {
		f.node[name] = node
		f.created[node]++
		f.job(pod).created = append(f.job(pod).created, time.Since(f.start).Seconds())
		f.seq[node] = append(f.seq[node], pod.Labels[podspec.LabelJob])
		if end, ok := f.lastEnd[node]; ok {
			f.handoffs = append(f.handoffs, (time.Since(f.start) - end).Seconds())
		}
		if len(f.node) == 1 {
			f.firstPod = time.Since(f.start)
		}
	}
	f.set(pod, ev.Type != watch.Deleted && !podspec.Finished(pod))
	if podspec.Finished(pod) && !f.ended[name] {
		f.ended[name] = true
		f.lastEnd[node] = time.Since(f.start)
		if pod.Status.Phase == corev1.PodSucceeded {
			f.succeeded++
			f.job(pod).succeeded = append(f.job(pod).succeeded, time.Since(f.start).Seconds())
			f.lastSuccess = time.Since(f.start)
			return pod
		}
		f.failed++
	}
	return nil
}

// jobTimes are one job's pod creations and successes, in order.
type jobTimes struct{ created, succeeded []float64 }

// job is the pod's job's times. Call locked.
func (f *flight) job(pod *corev1.Pod) *jobTimes {
	name := pod.Labels[podspec.LabelJob]
	if f.byJob[name] == nil {
		f.byJob[name] = &jobTimes{}
	}
	return f.byJob[name]
}

// set records whether the pod is in flight, and the peaks. Call locked.
func (f *flight) set(pod *corev1.Pod, unfinished bool) {
	name, node := pod.Name, pod.Spec.NodeName
	if f.unfinished[name] == unfinished {
		return
	}
	f.unfinished[name] = unfinished
	if !unfinished {
		f.perNode[node]--
		f.inFlight--
		return
	}
	f.perNode[node]++
	f.inFlight++
	f.peak = max(f.peak, f.inFlight)
	f.peakPerNode = max(f.peakPerNode, f.perNode[node])
	if f.perNode[node] > 1 && len(f.doubled) < 5 {
		var jobs []string
		for other, on := range f.node {
			if on == node && f.unfinished[other] {
				jobs = append(jobs, other)
			}
		}
		slices.Sort(jobs)
		f.doubled = append(f.doubled, fmt.Sprintf("%s at %.1fs: %s", node, time.Since(f.start).Seconds(), strings.Join(jobs, ", ")))
	}
}

// follow applies the watch's events until it is stopped.
func (f *flight) follow(w watch.Interface) {
	for ev := range w.ResultChan() {
		f.observe(ev)
	}
}

// figures are the flight's counts, for the results.
func (f *flight) figures() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	least, most := -1, 0
	for _, c := range f.created {
		most = max(most, c)
		if least < 0 || c < least {
			least = c
		}
	}
	h := slices.Sorted(slices.Values(f.handoffs))
	jobs := map[string]any{}
	for name, j := range f.byJob {
		jobs[name] = map[string]float64{"firstPod": quantile(j.created, 0), "halfPods": quantile(j.created, 0.5),
			"lastPod": quantile(j.created, 1), "halfSucceeded": quantile(j.succeeded, 0.5), "lastSucceeded": quantile(j.succeeded, 1)}
	}
	return map[string]any{"handoffMedianSeconds": quantile(h, 0.5), "handoffP95Seconds": quantile(h, 0.95), "handoffMaxSeconds": quantile(h, 1),
		"jobs":        jobs,
		"podsCreated": len(f.node), "podsSucceeded": f.succeeded, "podsFailed": f.failed,
		"peakInFlight": f.peak, "peakInFlightPerNode": f.peakPerNode, "nodesWithTwoInFlight": f.doubled,
		"podsPerNodeMin": max(least, 0), "podsPerNodeMax": most, "nodesWithPods": len(f.created),
		"firstPodSeconds": f.firstPod.Seconds(), "lastPodSucceededSeconds": f.lastSuccess.Seconds()}
}

// outOfOrder counts, given each job's place in the queue's order, the nodes
// that ran a job before one ranked ahead of it, and those pairs of pods.
func (f *flight) outOfOrder(place map[string]int) (nodes, pairs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, seq := range f.seq {
		inverted := 0
		for i := range seq {
			for j := i + 1; j < len(seq); j++ {
				if place[seq[i]] > place[seq[j]] {
					inverted++
				}
			}
		}
		pairs += inverted
		if inverted > 0 {
			nodes++
		}
	}
	return nodes, pairs
}

// quantile is the q-quantile of sorted values (0 for none).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// apiWrites are write requests the API server answered, from its
// apiserver_request_total, by "resource/subresource" and outcome.
type apiWrites map[string]float64

// apiServerWrites reads the API server's request counters.
func apiServerWrites(t *testing.T, cs kubernetes.Interface) apiWrites {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("the API server's metrics: %v", err)
	}
	out := apiWrites{}
	s := bufio.NewScanner(bytes.NewReader(body))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		l := labels(rest[:end])
		switch strings.ToUpper(l["verb"]) {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		outcome := "ok"
		switch {
		case l["code"] == "409":
			outcome = "conflict"
		case !strings.HasPrefix(l["code"], "2"):
			outcome = "error"
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		out[l["resource"]+"/"+l["subresource"]+" "+outcome] += v
	}
	return out
}

// since is the requests counted between two readings.
func (a apiWrites) since(before apiWrites) apiWrites {
	out := apiWrites{}
	for k, v := range a {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// labels parses a metric's label set: k="v",k2="v2" (values without
// escaped quotes, as these are).
func labels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.Index(s, `="`)
		if eq < 0 {
			break
		}
		key := strings.TrimLeft(s[:eq], ",")
		s = s[eq+2:]
		q := strings.IndexByte(s, '"')
		if q < 0 {
			break
		}
		out[key] = s[:q]
		s = s[q+1:]
	}
	return out
}
