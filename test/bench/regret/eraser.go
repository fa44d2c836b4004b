package regret

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// The pause image every node holds, pinned by its runtime.
const (
	pauseRef  = "registry.k8s.io/pause:3.10"
	pauseID   = "sha256:873ed75102791e5b0b8a7fcd41606c92fcec98d56d05ead4ac5131650004c136"
	pauseSize = 320 * 1024
)

// eraserRuntime is the node as CRI shows it to Eraser's workers.
type eraserRuntime struct{ n *Node }

var _ remover.Runtime = eraserRuntime{}

func (r eraserRuntime) ListImages(context.Context) ([]cri.Image, error) {
	out := make([]cri.Image, 0, len(r.n.images)+1)
	for _, idx := range r.n.sorted() {
		im := r.n.trace.Images[idx]
		out = append(out, cri.Image{ID: im.ID, Tags: []string{im.Ref()}, Digests: []string{im.Digest()}, Size: im.Size})
	}
	out = append(out, cri.Image{ID: pauseID, Tags: []string{pauseRef}, Size: pauseSize, Pinned: true})
	return out, nil
}

func (r eraserRuntime) ListContainers(context.Context) ([]cri.Container, error) {
	names := make([]string, 0, len(r.n.pods))
	for name := range r.n.pods {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]cri.Container, 0, len(names))
	for _, name := range names {
		p := r.n.pods[name]
		im := r.n.trace.Images[p.image]
		c := cri.Container{ID: name, Name: name, State: "CONTAINER_RUNNING", Image: im.Ref(), ImageRef: im.Digest(), ImageID: im.ID}
		if p.exited {
			c.State = "CONTAINER_EXITED"
		}
		if p.mount >= 0 {
			c.MountedImages = []string{r.n.trace.Images[p.mount].ID}
		}
		out = append(out, c)
	}
	return out, nil
}

func (r eraserRuntime) SandboxImage(context.Context) (string, error) { return pauseRef, nil }

func (r eraserRuntime) PodSandboxImages(context.Context) ([]string, error) {
	return []string{pauseRef}, nil
}

func (r eraserRuntime) StartRemovals(_ context.Context, ids []string) func() []error {
	errs := make([]error, len(ids))
	for k, id := range ids {
		idx, ok := r.n.trace.index(id)
		if !ok || !r.n.remove(idx, false) {
			errs[k] = fmt.Errorf("image %s not found", id)
		}
	}
	return func() []error { return errs }
}

// ImageTimes is when each image arrived, by ID, tag and digest, as
// containerd's image records say (the remover reads them for ages).
func (r eraserRuntime) ImageTimes(context.Context) (map[string]time.Time, error) {
	out := make(map[string]time.Time, 3*len(r.n.images))
	for idx, p := range r.n.images {
		im := r.n.trace.Images[idx]
		out[im.ID], out[im.Ref()], out[im.Digest()] = p.arrived, p.arrived, p.arrived
	}
	return out, nil
}

// sorted is the node's images in the trace's order, for a stable listing.
func (n *Node) sorted() []int {
	out := make([]int, 0, len(n.images))
	for idx := range n.images {
		out = append(out, idx)
	}
	sort.Ints(out)
	return out
}

// eraserNode is what one node keeps between Eraser's runs: its state
// directory (images.state and what else the workers keep there) and the
// cluster's references the manager hands its worker pod.
type eraserNode struct {
	n        *Node
	stateDir string
	refsDir  string
}

func newEraserNode(n *Node, dir string) (*eraserNode, error) {
	e := &eraserNode{n: n, stateDir: filepath.Join(dir, "state"), refsDir: filepath.Join(dir, "references")}
	for _, d := range []string{e.stateDir, e.refsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// run is one scheduled run on the node at now: the collector lists what
// the keep rules leave, and the remover, as it runs in a worker pod, plans
// with the retention settings and removes.
func (e *eraserNode) run(ctx context.Context, now time.Time, s retention.Settings, templates map[string]int) error {
	rt := eraserRuntime{e.n}
	var node, cluster []references.Ref
	for _, name := range sortedKeys(e.n.pods) {
		p := e.n.pods[name]
		if !p.exited {
			node = append(node, references.Ref{Image: e.n.trace.Images[p.image].Ref(), Owner: "Pod default/" + name})
		}
	}
	for _, owner := range sortedKeys(templates) {
		cluster = append(cluster, references.Ref{Image: e.n.trace.Images[templates[owner]].Ref(), Owner: owner})
	}
	if err := os.RemoveAll(e.refsDir); err != nil {
		return err
	}
	if err := references.WriteDir(e.refsDir, node, cluster); err != nil {
		return err
	}
	snap, err := remover.ReadNode(ctx, rt, protect.Policy{})
	if err != nil {
		return err
	}
	var collected []string
	for _, i := range snap.Candidates() {
		collected = append(collected, snap.Images[i].ID)
	}
	opts := remover.Options{
		Retention:   s,
		Now:         now,
		StateDir:    e.stateDir,
		Concurrency: 256,
		Run:         fmt.Sprintf("scheduled-%d", e.n.m.EraserRuns),
		// The ledger's removal times on the trace's clock.
		Clock:      func() time.Time { return now },
		Protection: protect.Flags{References: e.refsDir, RemoveVulnerable: true, KeepNotRepullable: true},
	}
	if s.DiskPressure() {
		opts.MeasureDisk = func(context.Context) (retention.Disk, error) {
			return retention.Disk{Capacity: e.n.trace.Capacity, Available: e.n.trace.Capacity - min(e.n.used, e.n.trace.Capacity)}, nil
		}
	}
	_, err = remover.Run(ctx, rt, remover.Targets{Scheduled: true, Collected: collected}, opts)
	e.n.m.EraserRuns++
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
