package regret

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	containertest "k8s.io/kubernetes/pkg/kubelet/container/testing"
	"k8s.io/kubernetes/pkg/kubelet/images"
)

// The kubelet's image garbage collection, as kubelet.go drives it: every
// ImageGCPeriod it calls GarbageCollect, which lists images and containers
// (every container, exited ones too), records when it first saw each image
// and last saw one used, and, when the image filesystem is at or above the
// high threshold, removes unused images older than MinAge, least recently
// used first, until it is below the low threshold.
const (
	ImageGCPeriod = 5 * time.Minute
	// KubeletMinAge, HighThreshold and LowThreshold are the kubelet's
	// defaults (imageMinimumGCAge, imageGCHighThresholdPercent,
	// imageGCLowThresholdPercent); imageMaximumGCAge is 0 (off).
	KubeletMinAge = 2 * time.Minute
	HighThreshold = 85
	LowThreshold  = 80
)

// kubeRuntime is the node as the kubelet's container runtime shows it.
// The methods the image GC calls read the node; the rest of the interface
// is the kubelet's own fake, never called here.
type kubeRuntime struct {
	*containertest.FakeRuntime
	n *Node
	// The listings as last built, and the node's change counts then: the
	// collector only reads them.
	images             []kubecontainer.Image
	pods               []*kubecontainer.Pod
	imagesGen, podsGen int
}

var _ kubecontainer.Runtime = (*kubeRuntime)(nil)

func (r *kubeRuntime) ListImages(context.Context) ([]kubecontainer.Image, error) {
	if r.images != nil && r.imagesGen == r.n.imagesGen {
		return r.images, nil
	}
	out := make([]kubecontainer.Image, 0, len(r.n.images)+1)
	for _, idx := range r.n.sorted() {
		im := r.n.trace.Images[idx]
		out = append(out, kubecontainer.Image{ID: im.ID, RepoTags: []string{im.Ref()}, RepoDigests: []string{im.Digest()}, Size: int64(im.Size)})
	}
	out = append(out, kubecontainer.Image{ID: pauseID, RepoTags: []string{pauseRef}, Size: int64(pauseSize), Pinned: true})
	r.images, r.imagesGen = out, r.n.imagesGen
	return out, nil
}

// GetPods lists every pod's container, exited ones too (all: the image
// collector's call).
func (r *kubeRuntime) GetPods(_ context.Context, all bool) ([]*kubecontainer.Pod, error) {
	if !all {
		return nil, fmt.Errorf("only all pods are listed here")
	}
	if r.pods != nil && r.podsGen == r.n.podsGen {
		return r.pods, nil
	}
	names := make([]string, 0, len(r.n.pods))
	for name := range r.n.pods {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*kubecontainer.Pod
	for _, name := range names {
		p := r.n.pods[name]
		im := r.n.trace.Images[p.image]
		state := kubecontainer.ContainerStateRunning
		if p.exited {
			state = kubecontainer.ContainerStateExited
		}
		out = append(out, &kubecontainer.Pod{ID: types.UID(name), Name: name, Namespace: "default",
			Containers: []*kubecontainer.Container{{
				ID:   kubecontainer.ContainerID{Type: "containerd", ID: name},
				Name: "main", Image: im.Ref(), ImageID: im.ID, ImageRef: im.Digest(), State: state,
			}}})
	}
	if out == nil {
		out = []*kubecontainer.Pod{}
	}
	r.pods, r.podsGen = out, r.n.podsGen
	return out, nil
}

// GetContainerStatus names the image a container mounts as a volume: the
// kubelet keeps it as in use (ImageVolume is GA).
func (r *kubeRuntime) GetContainerStatus(_ context.Context, uid types.UID, _ kubecontainer.ContainerID) (*kubecontainer.Status, error) {
	p := r.n.pods[string(uid)]
	if p == nil {
		return nil, fmt.Errorf("no pod %s", uid)
	}
	st := &kubecontainer.Status{Name: "main"}
	if p.mount >= 0 {
		st.Mounts = []kubecontainer.Mount{{Name: "data", Image: &runtimeapi.ImageSpec{Image: r.n.trace.Images[p.mount].ID}}}
	}
	return st, nil
}

func (r *kubeRuntime) RemoveImage(_ context.Context, spec kubecontainer.ImageSpec) error {
	idx, ok := r.n.trace.index(spec.Image)
	if !ok || !r.n.remove(idx, true) {
		return fmt.Errorf("image %s not found", spec.Image)
	}
	return nil
}

// kubeStats is the node's image filesystem as the kubelet's stats
// provider reports it.
type kubeStats struct{ n *Node }

func (s kubeStats) ImageFsStats(context.Context) (*statsapi.FsStats, *statsapi.FsStats, error) {
	capacity := s.n.trace.Capacity
	avail := capacity - min(s.n.used, capacity)
	fs := &statsapi.FsStats{CapacityBytes: &capacity, AvailableBytes: &avail}
	return fs, fs, nil
}

// kubeletGC is one node's image garbage collector, the kubelet's own, on a
// scaled clock: it reads the wall clock, so the call for the trace's time t
// is made no earlier than scale times faster than the trace (began + (t -
// Start)/scale), and at least ImageGCPeriod/scale after the call before,
// more than its MinAge of KubeletMinAge/scale: an image it first saw at one
// call is old enough at the next, as at the kubelet's 5-minute period.
type kubeletGC struct {
	gc      images.ImageGCManager
	began   time.Time
	last    time.Time
	scale   float64
	spacing time.Duration
	// Calls and Skipped count the periods called and those left out as
	// changing nothing (Needed).
	Calls, Skipped int
	gens           [2]int
}

func newKubeletGC(n *Node, scale float64) (*kubeletGC, error) {
	policy := images.ImageGCPolicy{HighThresholdPercent: HighThreshold, LowThresholdPercent: LowThreshold,
		MinAge: time.Duration(float64(KubeletMinAge) / scale)}
	gc, err := images.NewImageGCManager(&kubeRuntime{FakeRuntime: &containertest.FakeRuntime{}, n: n}, kubeStats{n}, nil,
		&record.FakeRecorder{}, &v1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("node-%d", n.ID)}, policy, noop.NewTracerProvider())
	if err != nil {
		return nil, err
	}
	return &kubeletGC{gc: gc, began: time.Now(), scale: scale, spacing: time.Duration(float64(ImageGCPeriod) / scale), gens: [2]int{-1, -1}}, nil
}

// Needed says whether the period's call at t can change what the
// collector decides, now or later: the node's images or pods changed since
// its last call (it records new images as first seen now, forgets removed
// ones, and stops seeing some used), or they change before the next period
// (it must see the images in use one last time, as the kubelet does within
// 5 minutes of a pod's end), or the image filesystem is at the high
// threshold (it removes). Otherwise the call would only move the last-used
// time of images that stay in use to a later time that is overwritten
// before anything reads it. Skipping such periods keeps every decision and
// saves most of the replay's time.
func (k *kubeletGC) Needed(n *Node, changesSoon bool) bool {
	capacity := n.trace.Capacity
	avail := capacity - min(n.used, capacity)
	usage := 100 - int(avail*100/capacity)
	return changesSoon || usage >= HighThreshold || k.gens != [2]int{n.imagesGen, n.podsGen}
}

// collect runs the period's collection for the trace's time t. Its error
// (it could not free enough: what is left is in use or too young) is the
// kubelet's to log, as it does.
func (k *kubeletGC) collect(ctx context.Context, n *Node, t time.Time) {
	at := k.began.Add(time.Duration(float64(t.Sub(Start)) / k.scale))
	if floor := k.last.Add(k.spacing); at.Before(floor) {
		at = floor
	}
	if wait := time.Until(at); wait > 0 {
		time.Sleep(wait)
	}
	k.last = time.Now()
	k.Calls++
	_ = k.gc.GarbageCollect(ctx, k.began)
	k.gens = [2]int{n.imagesGen, n.podsGen}
}
