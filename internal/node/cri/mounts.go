package cri

// The images a container mounts as image volumes (a pod's volumes[].image):
// the container list does not show a container's mounts, its status does.

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statusConcurrency bounds the ContainerStatus calls in flight: enough to
// hide each call's round trip, few enough that a node of hundreds of
// containers does not flood its runtime or hold many replies at once.
const statusConcurrency = 8

// mountCache is the images each container mounts, by container ID, as
// the last listing read them. A container's mounts are fixed when it is
// created (a restart is a new container), so a container listed before is
// not read again: the re-checks before each group of removals then read
// only the containers started since.
type mountCache struct {
	mu   sync.Mutex
	byID map[string][]string
}

// readMounts fills the MountedImages of each container, from the cache or
// from the runtime. A container that vanished since the listing is left
// with none: its mounts went with it. Any other failure is an error, never
// a container without mounts: an image a container mounts must not look
// unused because its status could not be read.
func (c *Client) readMounts(ctx context.Context, containers []Container) error {
	c.mounts.mu.Lock()
	var todo []int
	for i := range containers {
		if imgs, ok := c.mounts.byID[containers[i].ID]; ok {
			containers[i].MountedImages = imgs
		} else {
			todo = append(todo, i)
		}
	}
	// Every container known and none gone (the cache holds as many as
	// were listed, all of them found): the cache stays as it is. The
	// re-checks list hundreds of containers many times a run; under the
	// remover's memory limit they must not make a new index each time.
	unchanged := len(todo) == 0 && len(c.mounts.byID) == len(containers)
	c.mounts.mu.Unlock()
	if unchanged {
		return nil
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		gone = map[string]bool{}
	)
	sem := make(chan struct{}, statusConcurrency)
	for _, i := range todo {
		sem <- struct{}{}
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			<-sem
			break
		}
		wg.Add(1)
		go func(ctr *Container) {
			defer func() { <-sem; wg.Done() }()
			imgs, err := c.containerMounts(ctx, ctr.ID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case status.Code(err) == codes.NotFound:
				gone[ctr.ID] = true
			case err != nil:
				errs = append(errs, fmt.Errorf("reading the mounts of container %s (%s): %w", ctr.Name, ctr.ID, err))
				cancel()
			default:
				ctr.MountedImages = imgs
			}
		}(&containers[i])
	}
	wg.Wait()
	if len(errs) > 0 {
		// The first: the others are most often the cancellation it caused.
		return errs[0]
	}

	// Keep the containers listed now, forget the others.
	byID := make(map[string][]string, len(containers))
	for _, ctr := range containers {
		if !gone[ctr.ID] {
			byID[ctr.ID] = ctr.MountedImages
		}
	}
	c.mounts.mu.Lock()
	c.mounts.byID = byID
	c.mounts.mu.Unlock()
	return nil
}

// containerMounts reads one container's status, not verbose: the mounts
// are in the status itself.
func (c *Client) containerMounts(ctx context.Context, id string) ([]string, error) {
	resp, err := c.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return nil, err
	}
	return mountedImages(resp.GetStatus().GetMounts()), nil
}

// mountedImages are the images the mounts name, each once: the image as
// the kubelet passed it (most often the ID its pull resolved; containerd
// returns it as passed, CRI-O as the image's ID) and the reference the
// pod's volume names, where the runtime keeps it.
func mountedImages(mounts []*runtimeapi.Mount) []string {
	var out []string
	for _, m := range mounts {
		img := m.GetImage()
		for _, s := range []string{img.GetImage(), img.GetUserSpecifiedImage()} {
			if s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}
