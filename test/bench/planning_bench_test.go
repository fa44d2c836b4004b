//go:build linux && bench

package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/retention"
)

// Planning is measured at the sizes the retention issue names.
const (
	planImages     = 20000
	planContainers = 2000
)

// syntheticNode is a runtime of planImages images, planContainers of them
// used by a container, with pull times spread over 60 days; removals are
// not issued (the planning figure is a dry run's).
type syntheticNode struct {
	images     []cri.Image
	containers []cri.Container
	times      map[string]time.Time
}

func newSyntheticNode(now time.Time) *syntheticNode {
	n := &syntheticNode{times: map[string]time.Time{}}
	for i := range planImages {
		id := fmt.Sprintf("sha256:%064x", i+1)
		tag := fmt.Sprintf("registry.example.com/team%02d/app%05d:v%d", i%50, i, i%7)
		digest := fmt.Sprintf("registry.example.com/team%02d/app%05d@sha256:%064x", i%50, i, i+1<<40)
		n.images = append(n.images, cri.Image{ID: id, Tags: []string{tag}, Digests: []string{digest}, Size: uint64(20<<20 + i)})
		at := now.Add(-time.Duration(i%(60*24)) * time.Hour)
		n.times[id], n.times[tag], n.times[digest] = at, at, at
		if i%(planImages/planContainers) == 0 {
			n.containers = append(n.containers, cri.Container{ID: fmt.Sprintf("c%d", i), Name: fmt.Sprintf("app%d", i),
				State: "CONTAINER_RUNNING", Image: tag, ImageRef: digest, ImageID: id})
		}
	}
	return n
}

func (n *syntheticNode) ListImages(context.Context) ([]cri.Image, error) { return n.images, nil }
func (n *syntheticNode) ListContainers(context.Context) ([]cri.Container, error) {
	return n.containers, nil
}
func (n *syntheticNode) SandboxImage(context.Context) (string, error) {
	return "registry.k8s.io/pause:3.10", nil
}
func (n *syntheticNode) PodSandboxImages(context.Context) ([]string, error) { return nil, nil }
func (n *syntheticNode) ImageTimes(context.Context) (map[string]time.Time, error) {
	return n.times, nil
}
func (n *syntheticNode) StartRemovals(context.Context, []string) func() []error {
	panic("a dry run issued removals")
}

// planningFigure measures the remover's planning (remover.RunInfo.Planning:
// ages, the node state file, every policy) for planImages images and
// planContainers containers, the best of five dry runs on one state file,
// and compares it with the removal time of as many images at the rate the
// remover binary removed them above (at its largest size).
func planningFigure(t *testing.T, measured []figure) figure {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	node := newSyntheticNode(now)
	collected := make([]string, len(node.images))
	for i, img := range node.images {
		collected[i] = img.ID
	}
	state := t.TempDir()
	best := time.Duration(1<<63 - 1)
	for round := range 5 {
		info := &remover.RunInfo{}
		_, err := remover.Run(context.Background(), node, remover.Targets{Scheduled: true, Collected: collected}, remover.Options{
			DryRun: true, Info: info, Now: now.Add(time.Duration(round) * time.Hour), StateDir: state,
			Retention: retention.Settings{MinAge: 10 * time.Minute, UnusedFor: 30 * 24 * time.Hour, HighThresholdPercent: 85, LowThresholdPercent: 80},
			MeasureDisk: func(context.Context) (retention.Disk, error) {
				return retention.Disk{Capacity: 500 << 30, Available: 50 << 30}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		best = min(best, info.Planning)
	}
	st, _ := os.Stat(state + "/images.state")
	// The rate of the remover binary at the largest size measured.
	var perImage float64
	largest := 0
	for _, f := range measured {
		if strings.HasPrefix(f.Method, "remover") && f.Seconds > 0 && f.Images >= largest {
			largest, perImage = f.Images, f.Seconds/float64(f.Images)
		}
	}
	f := figure{Images: planImages, Method: fmt.Sprintf("planning, %d containers (dry run)", planContainers), Seconds: best.Seconds()}
	if perImage > 0 {
		f.PlanMs = float64(best.Microseconds()) / 1000
		f.PlanShare = best.Seconds() / (perImage * planImages)
	}
	size := int64(0)
	if st != nil {
		size = st.Size()
	}
	t.Logf("planning %d images, %d containers: %v (state file %d KiB); removal at the measured rate: %.1fs",
		planImages, planContainers, best, size>>10, perImage*planImages)
	return f
}
