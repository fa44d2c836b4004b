//go:build linux

package remover_test

import (
	"context"
	"sync"
	"testing"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// lateStarter is the real runtime, except that right after the remover has
// read the node's containers it starts a container from one of its targets:
// a kubelet starting a pod between collection and deletion.
type lateStarter struct {
	*cri.Client
	once  sync.Once
	start func()
}

func (l *lateStarter) ListContainers(ctx context.Context) ([]cri.Container, error) {
	out, err := l.Client.ListContainers(ctx)
	l.once.Do(l.start)
	return out, err
}

func TestContainerStartedAfterCollectionKeepsImage(t *testing.T) {
	noderuntime.EachNode(t, noderuntime.Options{}, func(t *testing.T, _ noderuntime.Runtime, n noderuntime.Node) {
		containerStartedAfterCollection(t, n)
	})
}

func containerStartedAfterCollection(t *testing.T, node noderuntime.Node) {
	pause := testimage.Pause(t)
	node.Import(t,
		testimage.Image{Tags: []string{"example.com/late:1"}, Files: map[string][]byte{"pause": pause}, Entrypoint: []string{"/pause"}, RandomBytes: 512},
		testimage.Image{Tags: []string{"example.com/idle:1"}, RandomBytes: 512},
	)
	rt := &lateStarter{Client: node.Client(t)}
	rt.start = func() { node.RunContainer(t, "late", "example.com/late:1") }

	targets, _ := remover.ParseTargets([]string{"example.com/late:1", "example.com/idle:1"})
	results, err := remover.Run(context.Background(), rt, targets, remover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]workerresult.Outcome{}
	for _, r := range results {
		got[r.Target] = r.Outcome
	}
	if got["example.com/late:1"] != workerresult.InUse || got["example.com/idle:1"] != workerresult.Removed {
		t.Errorf("outcomes %v: the late container's image must be kept, the idle one removed", got)
	}
	present := node.ImageIDs(t)
	if _, ok := present["example.com/late:1"]; !ok {
		t.Error("the image of a container started mid-run was removed")
	}
	if _, ok := present["example.com/idle:1"]; ok {
		t.Error("the idle image is still there")
	}
}
