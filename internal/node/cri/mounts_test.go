//go:build linux

package cri

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMountedImages(t *testing.T) {
	id := "sha256:" + strings.Repeat("b", 64)
	cases := map[string]struct {
		mounts []*runtimeapi.Mount
		want   []string
	}{
		"no mounts":   {},
		"bind mounts": {mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/srv/data"}, {ContainerPath: "/etc/hosts", HostPath: "/run/hosts"}}},
		"an image volume as containerd shows it": {
			mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/run/containerd/image-volumes/x", Image: &runtimeapi.ImageSpec{Image: id}}},
			want:   []string{id}},
		"the reference the pod named too": {
			mounts: []*runtimeapi.Mount{{ContainerPath: "/data", Image: &runtimeapi.ImageSpec{Image: id, UserSpecifiedImage: "example.com/data:1"}}},
			want:   []string{id, "example.com/data:1"}},
		"one image twice, another once": {
			mounts: []*runtimeapi.Mount{
				{ContainerPath: "/a", Image: &runtimeapi.ImageSpec{Image: id}},
				{ContainerPath: "/b", Image: &runtimeapi.ImageSpec{Image: id}, ImageSubPath: "sub"},
				{ContainerPath: "/c", Image: &runtimeapi.ImageSpec{Image: strings.Repeat("c", 64)}},
				{ContainerPath: "/d", HostPath: "/srv"},
			},
			want: []string{id, strings.Repeat("c", 64)}},
		"an empty image spec": {mounts: []*runtimeapi.Mount{{ContainerPath: "/a", Image: &runtimeapi.ImageSpec{}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, mountedImages(tc.mounts)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// statusRuntime serves containers whose status has the mounts given, or
// answers with the error given; it counts the status calls and the most in
// flight at once.
type statusRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu         sync.Mutex
	containers []*runtimeapi.Container
	mounts     map[string][]*runtimeapi.Mount
	errs       map[string]error
	delay      time.Duration
	calls      map[string]int
	inFlight   int
	maxFlight  int
}

func (f *statusRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake", RuntimeVersion: "1"}, nil
}

func (f *statusRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: f.containers}, nil
}

func (f *statusRuntime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	f.calls[req.GetContainerId()]++
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	err, mounts, delay := f.errs[req.GetContainerId()], f.mounts[req.GetContainerId()], f.delay
	f.mu.Unlock()
	time.Sleep(delay)
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
	if req.GetVerbose() {
		return nil, status.Error(codes.InvalidArgument, "the client asked for verbose status")
	}
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: req.GetContainerId(), Mounts: mounts}}, nil
}

func (f *statusRuntime) add(id string, mounts ...*runtimeapi.Mount) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = append(f.containers, &runtimeapi.Container{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: "n-" + id},
		Image: &runtimeapi.ImageSpec{Image: "example.com/app:1"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	f.mounts[id] = mounts
}

// dialFake serves f and returns our client of it.
func dialFake(t *testing.T, f *statusRuntime) *Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	c, err := Dial(context.Background(), "unix://"+sock, Timeouts{Connect: 10 * time.Second, List: time.Minute, Remove: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newStatusRuntime() *statusRuntime {
	return &statusRuntime{mounts: map[string][]*runtimeapi.Mount{}, errs: map[string]error{}, calls: map[string]int{}}
}

// TestListContainersMounts: each container's mounted images come from its
// status; a container that vanished meanwhile is listed without them; any
// other failure fails the listing rather than lose what a container mounts.
func TestListContainersMounts(t *testing.T) {
	data := &runtimeapi.Mount{ContainerPath: "/data", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:" + strings.Repeat("b", 64), UserSpecifiedImage: "example.com/data:1"}}
	cases := map[string]struct {
		errs map[string]error
		// want is each container's mounted images; nil: the listing fails
		// with wantErr.
		want    map[string][]string
		wantErr string
	}{
		"mounts read": {want: map[string][]string{"a": {"sha256:" + strings.Repeat("b", 64), "example.com/data:1"}, "b": nil}},
		"a container vanished": {errs: map[string]error{"a": status.Error(codes.NotFound, "no such container")},
			want: map[string][]string{"a": nil, "b": nil}},
		"a status fails": {errs: map[string]error{"a": status.Error(codes.Internal, "boom")},
			wantErr: "listing containers: reading the mounts of container n-a (a): rpc error: code = Internal desc = boom"},
		"a runtime without container status": {errs: map[string]error{"a": status.Error(codes.Unimplemented, "no"), "b": status.Error(codes.Unimplemented, "no")},
			wantErr: "code = Unimplemented"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newStatusRuntime()
			f.add("a", data)
			f.add("b", &runtimeapi.Mount{ContainerPath: "/srv", HostPath: "/srv"})
			f.errs = tc.errs
			containers, err := dialFake(t, f).ListContainers(context.Background())
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || containers != nil {
					t.Errorf("ListContainers = %+v, %v; want no containers and an error with %q", containers, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, c := range containers {
				got[c.ID] = c.MountedImages
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestListContainersReadsEachStatusOnce: a container's mounts are fixed at
// its creation, so a listing reads the status of the containers it has not
// seen only (the remover lists before each group of removals), a few at a
// time.
func TestListContainersReadsEachStatusOnce(t *testing.T) {
	f := newStatusRuntime()
	f.delay = 5 * time.Millisecond
	for i := range 40 {
		f.add(fmt.Sprint("c", i))
	}
	c := dialFake(t, f)
	ctx := context.Background()
	for range 3 {
		if _, err := c.ListContainers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.add("late", &runtimeapi.Mount{ContainerPath: "/d", Image: &runtimeapi.ImageSpec{Image: "example.com/data:1"}})
	containers, err := c.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.calls {
		if n != 1 {
			t.Errorf("container %s: %d status calls, want 1", id, n)
		}
	}
	if len(f.calls) != 41 {
		t.Errorf("%d containers' status read, want 41", len(f.calls))
	}
	if f.maxFlight > statusConcurrency || f.maxFlight < 2 {
		t.Errorf("%d status calls in flight at most, want 2 to %d", f.maxFlight, statusConcurrency)
	}
	if last := containers[len(containers)-1]; last.ID != "late" || !cmp.Equal(last.MountedImages, []string{"example.com/data:1"}) {
		t.Errorf("the container started last: %+v", last)
	}
}
