//go:build windows

package cri_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
)

// fakeRuntime serves enough of CRI v1 over a named pipe for the client and
// the remover: a stand-in for containerd on a Windows node.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	mu         sync.Mutex
	images     []*runtimeapi.Image
	containers []*runtimeapi.Container
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake-containerd", RuntimeVersion: "1.7.20", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}, Info: map[string]string{
		"config": `{"sandboxImage":"mcr.microsoft.com/oss/kubernetes/pause:3.9"}`}}, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: f.containers}, nil
}

// ContainerStatus answers as a Windows node's containerd does: no image
// volumes there.
func (f *fakeRuntime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.GetId() == req.GetContainerId() {
			return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: c.GetId(), Metadata: c.GetMetadata(), Image: c.GetImage(), ImageRef: c.GetImageRef()}}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no container %s", req.GetContainerId())
}

func (f *fakeRuntime) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ListImagesResponse{Images: f.images}, nil
}

func (f *fakeRuntime) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, img := range f.images {
		if img.GetId() == req.GetImage().GetImage() {
			f.images = append(f.images[:i], f.images[i+1:]...)
			break
		}
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeRuntime) ids() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for _, img := range f.images {
		out[img.GetRepoTags()[0]] = true
	}
	return out
}

func underWine() bool { return os.Getenv("WINEPREFIX") != "" }

// serve listens on a fresh named pipe and serves the fake runtime.
func serve(t *testing.T, f *fakeRuntime, opts ...grpc.ServerOption) string {
	t.Helper()
	name := fmt.Sprintf(`\\.\pipe\eraser-test-%d`, time.Now().UnixNano())
	l, err := winio.ListenPipe(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if underWine() {
		// Wine 8 hands the first client to go-winio's idle first pipe
		// instance, where it hangs; a connection parked there until the
		// listener closes keeps real clients off it. Not needed on Windows.
		park, err := winio.DialPipe(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = park.Close() })
	}
	srv := grpc.NewServer(opts...)
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	runtimeapi.RegisterImageServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "npipe://./pipe/" + name[len(`\\.\pipe\`):]
}

func image(id, tag string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, RepoTags: []string{tag}, Size: 100}
}

// TestNamedPipeClient: the CRI client dials a named pipe, lists and removes.
func TestNamedPipeClient(t *testing.T) {
	f := &fakeRuntime{images: []*runtimeapi.Image{
		image("sha256:"+fmt.Sprintf("%064d", 1), "mcr.microsoft.com/windows/servercore:ltsc2022"),
		image("sha256:"+fmt.Sprintf("%064d", 2), "example.com/tool:1"),
	}}
	endpoint := serve(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, endpoint, cri.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.RuntimeName != "fake-containerd" {
		t.Errorf("runtime %q", c.RuntimeName)
	}
	images, err := c.ListImages(ctx)
	if err != nil || len(images) != 2 {
		t.Fatalf("ListImages: %v, %v", images, err)
	}
	if err := c.RemoveImage(ctx, images[1].ID); err != nil {
		t.Fatal(err)
	}
	for _, err := range c.RemoveImages(ctx, []string{images[0].ID}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if left := f.ids(); len(left) != 0 {
		t.Errorf("images left: %v", left)
	}
	// The fake is CRI only, as CRI-O: callers fall back.
	if times, err := c.ImageTimes(ctx); !errors.Is(err, cri.ErrNoImageTimes) {
		t.Errorf("ImageTimes = %v, %v; want ErrNoImageTimes", times, err)
	}
}

// rawOrProto lets the fake serve containerd's images API as wire bytes beside
// the generated CRI services on one server.
type rawOrProto struct{}

func (rawOrProto) Name() string { return "proto" }

func (rawOrProto) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (rawOrProto) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = append((*b)[:0], data...)
		return nil
	}
	return proto.Unmarshal(data, v.(proto.Message))
}

// TestImageTimesOverNamedPipe: containerd's images API reaches the client
// over the same pipe as CRI, in the k8s.io namespace.
func TestImageTimesOverNamedPipe(t *testing.T) {
	at := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	var reply []byte
	for _, name := range []string{"example.com/tool:1", "sha256:" + fmt.Sprintf("%064d", 2)} {
		ts, err := proto.Marshal(timestamppb.New(at))
		if err != nil {
			t.Fatal(err)
		}
		var img []byte
		img = protowire.AppendTag(img, 1, protowire.BytesType)
		img = protowire.AppendString(img, name)
		img = protowire.AppendTag(img, 8, protowire.BytesType)
		img = protowire.AppendBytes(img, ts)
		reply = protowire.AppendTag(reply, 1, protowire.BytesType)
		reply = protowire.AppendBytes(reply, img)
	}
	var namespace string
	images := func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		if method != "/containerd.services.images.v1.Images/List" {
			return status.Errorf(codes.Unimplemented, "unknown method %s", method)
		}
		if md, ok := metadata.FromIncomingContext(stream.Context()); ok && len(md.Get("containerd-namespace")) == 1 {
			namespace = md.Get("containerd-namespace")[0]
		}
		var req []byte
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		return stream.SendMsg(&reply)
	}
	f := &fakeRuntime{images: []*runtimeapi.Image{image("sha256:"+fmt.Sprintf("%064d", 2), "example.com/tool:1")}}
	endpoint := serve(t, f, grpc.ForceServerCodec(rawOrProto{}), grpc.UnknownServiceHandler(images))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, endpoint, cri.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	times, err := c.ImageTimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 2 || !times["example.com/tool:1"].Equal(at) || namespace != "k8s.io" {
		t.Errorf("times %v in namespace %q; want both records at %v in k8s.io", times, namespace, at)
	}
	if images, err := c.ListImages(ctx); err != nil || len(images) != 1 {
		t.Errorf("ListImages after ImageTimes: %v, %v", images, err)
	}
}

// TestRemoverOverNamedPipe: the remover end to end on a Windows node's
// runtime: removes the unused image, keeps the one a container uses and the
// sandbox image.
func TestRemoverOverNamedPipe(t *testing.T) {
	f := &fakeRuntime{
		images: []*runtimeapi.Image{
			image("sha256:"+fmt.Sprintf("%064d", 1), "mcr.microsoft.com/windows/servercore:ltsc2022"),
			image("sha256:"+fmt.Sprintf("%064d", 2), "example.com/app:1"),
			image("sha256:"+fmt.Sprintf("%064d", 3), "mcr.microsoft.com/oss/kubernetes/pause:3.9"),
		},
		containers: []*runtimeapi.Container{{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image: &runtimeapi.ImageSpec{Image: "example.com/app:1"}, ImageRef: "sha256:" + fmt.Sprintf("%064d", 2)}},
	}
	endpoint := serve(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, endpoint, cri.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	targets, _ := remover.ParseTargets([]string{"*"})
	results, err := remover.Run(ctx, c, targets, remover.Options{Policy: protect.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	s := remover.Summarize(results, false)
	if s.Counts["removed"] != 1 || s.Counts["in use"] != 1 || s.Counts["pinned"] != 1 {
		t.Errorf("counts %v", s.Counts)
	}
	left := f.ids()
	if left["mcr.microsoft.com/windows/servercore:ltsc2022"] || !left["example.com/app:1"] || !left["mcr.microsoft.com/oss/kubernetes/pause:3.9"] {
		t.Errorf("images left: %v", left)
	}
}
