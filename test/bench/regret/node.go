package regret

import (
	"time"
)

// pod is a pod's container on a node.
type pod struct {
	name   string
	image  int
	mount  int
	exited bool
}

// present is an image on a node.
type present struct {
	arrived time.Time
}

// Node is one node of a replay: its images, its pods' containers, its
// image filesystem, and what the replay counted there.
type Node struct {
	ID     int
	trace  *Trace
	images map[int]*present
	// removed are the images a collector removed from this node: pulling
	// one of them again is the regret counted.
	removed map[int]bool
	pods    map[string]*pod
	used    uint64
	m       *Metrics
	// imagesGen and podsGen count the changes to images and pods, so that
	// a listing is rebuilt only after one.
	imagesGen, podsGen int
}

func newNode(id int, t *Trace, m *Metrics) *Node {
	n := &Node{ID: id, trace: t, images: map[int]*present{}, removed: map[int]bool{}, pods: map[string]*pod{}, used: t.Base, m: m}
	for _, p := range t.Preload[id] {
		n.images[p.Image] = &present{arrived: p.Arrived}
		n.used += t.Images[p.Image].Size
	}
	n.sample()
	return n
}

// Metrics are what one policy's replay of one trace counted.
type Metrics struct {
	Starts int `json:"podStarts"`
	// Pulled and Repulled are bytes; Repulled pulls are of images a
	// collector had removed from the node that pulled them again.
	PulledBytes   uint64 `json:"bytesPulled"`
	RepulledBytes uint64 `json:"bytesRepulled"`
	Repulls       int    `json:"repulls"`
	// WaitedStarts are the pod starts that waited on such a pull.
	WaitedStarts int `json:"startsWaitedOnRepull"`
	// FailedStarts: the node had removed the image and the registry had
	// dropped it since. FailedNeverHad: the registry had dropped an image
	// the node never had (no policy of the node could help).
	FailedStarts   int `json:"startsFailedRegistryDropped"`
	FailedNeverHad int `json:"startsFailedNeverOnNode"`
	// DiskFull: a pull that did not fit on the image filesystem.
	DiskFull int `json:"startsFailedDiskFull"`
	// PeakPercent is the highest use of any node's image filesystem;
	// MeanPercent the mean over nodes and the replay's 5-minute ticks.
	PeakPercent float64 `json:"peakDiskPercent"`
	MeanPercent float64 `json:"meanDiskPercent"`
	PeakBytes   uint64  `json:"peakDiskBytes"`
	// FreedBytes is every removal's; by the kubelet's collector and by
	// Eraser's runs.
	FreedBytes        uint64 `json:"bytesFreed"`
	FreedKubeletBytes uint64 `json:"bytesFreedByKubelet"`
	FreedEraserBytes  uint64 `json:"bytesFreedByEraser"`
	Removals          int    `json:"removals"`
	EraserRuns        int    `json:"eraserRuns"`
	sumPercent        float64
	samples           int
	capacity          uint64
}

func (n *Node) percent() float64 { return float64(n.used) * 100 / float64(n.trace.Capacity) }

func (n *Node) sample() {
	if n.used > n.m.PeakBytes {
		n.m.PeakBytes = n.used
		n.m.PeakPercent = n.percent()
	}
}

// tick adds the node's use to the mean.
func (n *Node) tick() {
	n.m.sumPercent += n.percent()
	n.m.samples++
}

// apply replays one event on the node.
func (n *Node) apply(e Event) {
	switch e.Kind {
	case PodStart:
		n.m.Starts++
		ok := true
		for _, img := range []int{e.Image, e.Mount} {
			if img >= 0 && !n.ensure(img, e.At) {
				ok = false
			}
		}
		if ok {
			n.pods[e.Pod] = &pod{name: e.Pod, image: e.Image, mount: e.Mount}
			n.podsGen++
		}
	case PodExit:
		if p := n.pods[e.Pod]; p != nil {
			p.exited = true
			n.podsGen++
		}
	case PodDelete:
		if n.pods[e.Pod] != nil {
			delete(n.pods, e.Pod)
			n.podsGen++
		}
	}
}

// ensure pulls img unless the node has it; false when the pull failed.
func (n *Node) ensure(img int, at time.Time) bool {
	if n.images[img] != nil {
		return true
	}
	im := n.trace.Images[img]
	if !im.Available(at) {
		if n.removed[img] {
			n.m.FailedStarts++
		} else {
			n.m.FailedNeverHad++
		}
		return false
	}
	if n.used+im.Size > n.trace.Capacity {
		n.m.DiskFull++
		return false
	}
	n.m.PulledBytes += im.Size
	if n.removed[img] {
		n.m.RepulledBytes += im.Size
		n.m.Repulls++
		n.m.WaitedStarts++
	}
	n.images[img] = &present{arrived: at}
	n.imagesGen++
	n.used += im.Size
	n.sample()
	return true
}

// remove takes an image off the node; byKubelet says whose removal it is.
func (n *Node) remove(img int, byKubelet bool) bool {
	if n.images[img] == nil {
		return false
	}
	size := n.trace.Images[img].Size
	delete(n.images, img)
	n.imagesGen++
	n.removed[img] = true
	n.used -= size
	n.m.FreedBytes += size
	n.m.Removals++
	if byKubelet {
		n.m.FreedKubeletBytes += size
	} else {
		n.m.FreedEraserBytes += size
	}
	return true
}
