// Package cri is the node workers' client of the container runtime (CRI v1):
// list images and containers, read the runtime's sandbox image, remove
// images. Every call has its own timeout, so one slow removal never eats the
// budget of the others.
package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// EnvRuntimeEndpoint names the environment variable workers read the
// endpoint from when --runtime-endpoint is not given.
const EnvRuntimeEndpoint = "ERASER_RUNTIME_ENDPOINT"

// ErrNoCRIv1 means the runtime answers but does not serve CRI v1.
var ErrNoCRIv1 = errors.New("the runtime does not serve CRI v1 (runtime.v1.RuntimeService); upgrade it (containerd >= 1.6, CRI-O >= 1.24)")

// Timeouts bound each kind of call.
type Timeouts struct {
	// Connect bounds the first call, which establishes the connection.
	Connect time.Duration
	// List bounds listing images or containers and reading status.
	List time.Duration
	// Remove bounds one RemoveImage; large Windows images take over a
	// minute to delete.
	Remove time.Duration
}

// DefaultTimeouts suit a busy node.
var DefaultTimeouts = Timeouts{Connect: 10 * time.Second, List: 2 * time.Minute, Remove: 5 * time.Minute}

// maxMessage is large enough for tens of thousands of images in one list.
const maxMessage = 64 << 20

// Image is what the runtime reports of one image.
type Image struct {
	ID      string
	Tags    []string
	Digests []string
	Size    uint64
	Pinned  bool
}

// Container is what the runtime reports of one container, in any state.
type Container struct {
	ID    string
	Name  string
	State string
	// Image is the image as the container spec names it (a tag or an ID).
	Image string
	// ImageRef and ImageID identify the image the container was created
	// from; a runtime fills one or both.
	ImageRef string
	ImageID  string
	// MountedImages are the images the container mounts as image volumes,
	// as its status names them: each needs its image as much as the
	// container's own image.
	MountedImages []string
}

// Client talks CRI v1 to one runtime endpoint.
type Client struct {
	conn     *grpc.ClientConn
	runtime  runtimeapi.RuntimeServiceClient
	images   runtimeapi.ImageServiceClient
	timeouts Timeouts
	mounts   mountCache
	// Address is the endpoint dialed.
	Address endpoint.Address
	// RuntimeName and RuntimeVersion are what the runtime reported.
	RuntimeName, RuntimeVersion string
}

// Dial connects to the endpoint (unix:// or npipe://) and checks that the
// runtime serves CRI v1.
func Dial(ctx context.Context, address string, timeouts Timeouts) (*Client, error) {
	addr, err := endpoint.Parse(address)
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint: %w", err)
	}
	if addr.Scheme == endpoint.Unix {
		if _, err := os.Stat(addr.Path); err != nil {
			return nil, fmt.Errorf("runtime socket %s: %w (is the runtime running, and its socket mounted into the pod?)", addr.Path, err)
		}
	}
	dial, err := Dialer(addr)
	if err != nil {
		return nil, err
	}
	// passthrough: the dialer knows the address; no resolver must rewrite it.
	conn, err := grpc.NewClient("passthrough:///cri",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)),
	)
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %s: %w", addr, err)
	}
	c := &Client{
		conn: conn, timeouts: timeouts, Address: addr,
		runtime: runtimeapi.NewRuntimeServiceClient(conn),
		images:  runtimeapi.NewImageServiceClient(conn),
	}
	cctx, cancel := context.WithTimeout(ctx, timeouts.Connect)
	defer cancel()
	v, err := c.runtime.Version(cctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true))
	if err != nil {
		_ = conn.Close()
		if status.Code(err) == codes.Unimplemented {
			return nil, ErrNoCRIv1
		}
		return nil, fmt.Errorf("runtime at %s did not answer within %v: %w", addr, timeouts.Connect, err)
	}
	c.RuntimeName, c.RuntimeVersion = v.GetRuntimeName(), v.GetRuntimeVersion()
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) listCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeouts.List)
}

// ListImages lists every image the runtime holds (containerd: namespace k8s.io).
func (c *Client) ListImages(ctx context.Context) ([]Image, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	resp, err := c.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	images := resp.GetImages()
	out := make([]Image, 0, len(images))
	for i, img := range images {
		out = append(out, Image{ID: img.GetId(), Tags: img.GetRepoTags(), Digests: img.GetRepoDigests(), Size: img.GetSize(), Pinned: img.GetPinned()})
		// Let the collector reclaim each message as it is converted: on a
		// node of tens of thousands of images the messages and their copy
		// would otherwise be held at once.
		images[i] = nil
	}
	return out, nil
}

// ListContainers lists every container in every state: an exited container
// can be restarted and still needs its image, and the images it mounts
// (read from each container's status the first time it is listed).
func (c *Client) ListContainers(ctx context.Context) ([]Container, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	out := make([]Container, 0, len(resp.GetContainers()))
	for _, ctr := range resp.GetContainers() {
		out = append(out, Container{
			ID: ctr.GetId(), Name: ctr.GetMetadata().GetName(), State: ctr.GetState().String(),
			Image: ctr.GetImage().GetImage(), ImageRef: ctr.GetImageRef(), ImageID: ctr.GetImageId(),
		})
	}
	if err := c.readMounts(ctx, out); err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	return out, nil
}

// RemoveImage removes an image by ID. Removing one that is already gone is
// not an error.
func (c *Client) RemoveImage(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeouts.Remove)
	defer cancel()
	_, err := c.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing image %s: %w", id, err)
	}
	return nil
}

// removeImage is RemoveImage as a stream, so that many can be in flight
// from one goroutine.
var removeImage = &grpc.StreamDesc{StreamName: "RemoveImage"}

const removeImageMethod = "/runtime.v1.ImageService/RemoveImage"

// RemoveImages removes images by ID, all at once, and returns one error per
// image (nil when removed or already gone).
//
// containerd makes each removal wait for a clean-up pass over every image on
// the node, and removals in flight together share that pass, so issuing them
// all at once is many times faster than a loop. Issuing them from one
// goroutine, as streams, keeps memory flat however many there are: no
// goroutine stack per removal.
func (c *Client) RemoveImages(ctx context.Context, ids []string) []error {
	return c.StartRemovals(ctx, ids)()
}

// StartRemovals issues the removals as RemoveImages does and returns at
// once; the function it returns waits for them, and must be called to
// release them. Callers use the time between to prepare the next removals.
func (c *Client) StartRemovals(ctx context.Context, ids []string) (wait func() []error) {
	errs := make([]error, len(ids))
	streams := make([]grpc.ClientStream, len(ids))
	cancels := make([]context.CancelFunc, len(ids))
	for i, id := range ids {
		sctx, cancel := context.WithTimeout(ctx, c.timeouts.Remove)
		cancels[i] = cancel
		cs, err := c.conn.NewStream(sctx, removeImage, removeImageMethod)
		if err == nil {
			err = cs.SendMsg(&runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}})
		}
		if err == nil {
			err = cs.CloseSend()
		}
		if err != nil {
			errs[i] = fmt.Errorf("removing image %s: %w", id, err)
			cancel()
			continue
		}
		streams[i] = cs
	}
	return func() []error {
		for i, cs := range streams {
			if cs == nil {
				continue
			}
			// One receive: a unary-shaped stream ends with its single reply.
			err := cs.RecvMsg(&runtimeapi.RemoveImageResponse{})
			cancels[i]()
			if err != nil && status.Code(err) != codes.NotFound {
				errs[i] = fmt.Errorf("removing image %s: %w", ids[i], err)
			}
		}
		return errs
	}
}

// ImageFsUsage is the bytes used on the runtime's image filesystems.
func (c *Client) ImageFsUsage(ctx context.Context) (uint64, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	resp, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return 0, fmt.Errorf("reading image filesystem usage: %w", err)
	}
	var used uint64
	for _, fs := range resp.GetImageFilesystems() {
		used += fs.GetUsedBytes().GetValue()
	}
	return used, nil
}

// ImageFsMountpoints are the mount points of the runtime's image
// filesystems, as it names them on the host (containerd: its snapshotter's
// root), each once. The runtime's used bytes count only its own files, while
// disk pressure is about the whole filesystem: callers statfs these.
func (c *Client) ImageFsMountpoints(ctx context.Context) ([]string, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	resp, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("reading image filesystem info: %w", err)
	}
	var out []string
	for _, fs := range resp.GetImageFilesystems() {
		if mp := fs.GetFsId().GetMountpoint(); mp != "" && !slices.Contains(out, mp) {
			out = append(out, mp)
		}
	}
	return out, nil
}
