//go:build linux && bench

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// largeNode serves CRI for a node of planImages images and planContainers
// containers, the sizes the retention issue names, which a real containerd
// on this machine takes most of an hour to hold: the remover binary's memory
// at that scale is measured against it, in its default memory limit. Its
// removals succeed at once, so the figure is the remover's memory and
// planning, not the runtime's speed.
type largeNode struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	images     []*runtimeapi.Image
	containers []*runtimeapi.Container
	mu         sync.Mutex
	removed    int
	gone       map[string]bool
	// keep answers every removal with success and keeps the image, as
	// containerd does with its stale side-loaded images: the remover's
	// listing after the removals is then as large as the first.
	keep bool
}

// newLargeNode serves the planning benchmark's synthetic node over CRI.
func newLargeNode() *largeNode {
	synthetic := newSyntheticNode(time.Now())
	n := &largeNode{gone: map[string]bool{}}
	for _, img := range synthetic.images {
		n.images = append(n.images, &runtimeapi.Image{Id: img.ID, RepoTags: img.Tags, RepoDigests: img.Digests, Size: img.Size})
	}
	for _, c := range synthetic.containers {
		n.containers = append(n.containers, &runtimeapi.Container{Id: c.ID, Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
			Image: &runtimeapi.ImageSpec{Image: c.Image}, ImageRef: c.ImageRef, ImageId: c.ImageID, State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	return n
}

func (n *largeNode) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "large-node", RuntimeVersion: "1"}, nil
}

func (n *largeNode) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": `{"sandboxImage":"registry.k8s.io/pause:3.10"}`}}, nil
}

func (n *largeNode) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{}, nil
}

func (n *largeNode) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: n.containers}, nil
}

// ContainerStatus answers for the listed containers, which mount no
// images: the remover reads each one's status once per run.
func (n *largeNode) ContainerStatus(_ context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: r.GetContainerId(),
		State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, nil
}

func (n *largeNode) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*runtimeapi.Image, 0, len(n.images))
	for _, img := range n.images {
		if !n.gone[img.Id] {
			out = append(out, img)
		}
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

func (n *largeNode) RemoveImage(_ context.Context, r *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	n.mu.Lock()
	n.removed++
	if !n.keep {
		n.gone[r.GetImage().GetImage()] = true
	}
	n.mu.Unlock()
	return &runtimeapi.RemoveImageResponse{}, nil
}

// TestRemoverAtScale runs the remover binary with "*" on the large node, in
// a memory cgroup of its default limit (30Mi): the kernel kills it if it
// goes over. Run by make bench-remover.
func TestRemoverAtScale(t *testing.T) {
	bin := workers.Dir(t)
	node := newLargeNode()
	// BENCH_REMOVER_KEEP=1: the runtime keeps what it says it removed (the
	// remover's worst case for memory: a second full listing).
	node.keep = os.Getenv("BENCH_REMOVER_KEEP") != ""
	outcome := "removed"
	if node.keep {
		outcome = "refused"
	}
	dir, err := os.MkdirTemp("", "large")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxSendMsgSize(64 << 20))
	runtimeapi.RegisterRuntimeServiceServer(srv, node)
	runtimeapi.RegisterImageServiceServer(srv, node)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	limit := int64(defaultRemoverLimit)
	if v := os.Getenv("BENCH_REMOVER_LIMIT_MIB"); v != "" {
		// Investigation: how much the remover takes when allowed more.
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		limit = int64(n) << 20
	}
	cg := newMemoryCgroup(t, limit)
	if cg == nil {
		t.Skip("no memory cgroup to run in")
	}
	list := filepath.Join(dir, "images")
	if err := os.WriteFile(list, []byte(`["*"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "summary")
	cmd := cg.command(filepath.Join(bin, "remover"), "--imagelist="+list, "--runtime-endpoint=unix://"+sock, "--summary-file="+summary,
		"--log-level=warn", "--min-age=0s", "--state-dir="+filepath.Join(dir, "state"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if os.Getenv("BENCH_STAT") != "" {
		t.Logf("remover output:\n%s", out)
	}
	if err != nil {
		t.Fatalf("remover in a %d MiB cgroup: %v (killed = over its memory limit)\n%s", limit>>20, err, out)
	}
	d := time.Since(start)
	if st, err := os.ReadFile(filepath.Join(cg.dir, "memory.stat")); err == nil && os.Getenv("BENCH_STAT") != "" {
		t.Logf("memory.stat:\n%s", st)
	}
	sum := summaryOf(t, summary)
	method := fmt.Sprintf("remover in %dMi, %d containers, fake CRI", limit>>20, planContainers)
	if node.keep {
		method += ", every image kept (refused)"
	}
	f := figure{Images: planImages, Method: method, Seconds: d.Seconds(),
		PeakRSSMiB: float64(sum.PeakRSSBytes) / (1 << 20), PlanMs: sum.PlanMs, PlanShare: sum.PlanMs / 1000 / d.Seconds()}
	t.Logf("%d images, %d containers: removed %d, in use %d in %.1fs; peak RSS %.1f MiB (cgroup peak %.1f MiB incl. page cache); planning %.0f ms",
		planImages, planContainers, sum.Counts["removed"], sum.Counts["in use"], d.Seconds(), f.PeakRSSMiB, float64(cg.peak())/(1<<20), sum.PlanMs)
	if sum.Counts[outcome] != planImages-planContainers || node.removed != planImages-planContainers {
		t.Errorf("%s %d (runtime saw %d removals), want %d", outcome, sum.Counts[outcome], node.removed, planImages-planContainers)
	}
	printFigures([]figure{f})
	writeResults(t, "remover-scale", "figures", []figure{f})
}
