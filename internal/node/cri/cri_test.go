//go:build linux

package cri_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// TestAgainstContainerd exercises every call against a real containerd.
func TestAgainstContainerd(t *testing.T) {
	ctrd := testcontainerd.Start(t)
	ctrd.Import(t,
		testimage.Image{Tags: []string{"example.com/app:1", "example.com/app:latest"}, Files: map[string][]byte{"pause": testimage.Pause(t)}, Entrypoint: []string{"/pause"}, RandomBytes: 4096},
		testimage.Image{Tags: []string{"example.com/junk:1"}, RandomBytes: 2048},
	)
	c := ctrd.Client(t)
	ctx := context.Background()
	if c.RuntimeName != "containerd" || c.RuntimeVersion == "" {
		t.Errorf("runtime %q %q", c.RuntimeName, c.RuntimeVersion)
	}

	images, err := c.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byTag := map[string]cri.Image{}
	for _, img := range images {
		for _, tag := range img.Tags {
			byTag[tag] = img
		}
	}
	app := byTag["example.com/app:1"]
	if !strings.HasPrefix(app.ID, "sha256:") || app.Size == 0 || !slices.Contains(app.Tags, "example.com/app:latest") {
		t.Errorf("app image = %+v", app)
	}
	// The sandbox image is protected one way or the other: containerd 1.6
	// and 1.7 name it in their verbose status and do not pin it; 2.x pins
	// it and names it no more (its image config left the status).
	pause := byTag[testcontainerd.SandboxImage]
	sandbox, err := c.SandboxImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pause.ID == "" || (!pause.Pinned && sandbox != testcontainerd.SandboxImage) {
		t.Errorf("containerd %s: the sandbox image %+v is neither pinned nor named by the status (SandboxImage = %q)", c.RuntimeVersion, pause, sandbox)
	}

	podID, ctrID := ctrd.RunContainer(t, "runner", "example.com/app:1")
	containers, err := c.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(containers) != 1 || containers[0].ID != ctrID || containers[0].State != "CONTAINER_RUNNING" || containers[0].ImageRef != app.ID {
		t.Errorf("containers = %+v, want the running one with ImageRef %s", containers, app.ID)
	}
	ctrd.StopPod(t, podID)
	containers, err = c.ListContainers(ctx)
	if err != nil || len(containers) != 1 || containers[0].State != "CONTAINER_EXITED" {
		t.Errorf("after stop, containers = %+v, %v; exited containers must stay listed", containers, err)
	}

	// containerd refreshes its usage figures periodically: only the call is checked.
	if _, err := c.ImageFsUsage(ctx); err != nil {
		t.Errorf("ImageFsUsage: %v", err)
	}
	if err := c.RemoveImage(ctx, byTag["example.com/junk:1"].ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := ctrd.ImageIDs(t)["example.com/junk:1"]; ok {
		t.Error("junk image still there")
	}
	if err := c.RemoveImage(ctx, "sha256:"+strings.Repeat("0", 64)); err != nil {
		t.Errorf("removing an absent image: %v, want nil", err)
	}
}

// serveRuntime serves a gRPC server on a unix socket in dir, with what
// register adds to it, for as long as the test runs, and returns the socket.
func serveRuntime(t *testing.T, dir string, register func(*grpc.Server)) string {
	t.Helper()
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return sock
}

func TestDialErrors(t *testing.T) {
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// A gRPC server that serves no CRI at all: as a runtime without CRI v1.
	sock := serveRuntime(t, dir, func(*grpc.Server) {})

	cases := map[string]struct {
		endpoint string
		want     error
		wantMsg  string
	}{
		"socket missing": {endpoint: "unix://" + filepath.Join(dir, "missing.sock"), wantMsg: "is the runtime running, and its socket mounted"},
		"no CRI v1":      {endpoint: "unix://" + sock, want: cri.ErrNoCRIv1},
		"tcp":            {endpoint: "tcp://127.0.0.1:1", wantMsg: "unsupported scheme"},
		"pipe on linux":  {endpoint: "npipe://./pipe/containerd-containerd", wantMsg: "named pipes exist on Windows"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := cri.Dial(ctx, tc.endpoint, cri.Timeouts{Connect: 2 * time.Second, List: time.Second, Remove: time.Second})
			if err == nil {
				c.Close()
				t.Fatal("dialed")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err = %v, want %q", err, tc.wantMsg)
			}
		})
	}
}

// TestPodSandboxImages: containerd names each pod sandbox's image in its
// verbose status; that is how the remover finds the pause image when the
// runtime's own status does not name it.
func TestPodSandboxImages(t *testing.T) {
	ctrd := testcontainerd.Start(t)
	c := ctrd.Client(t)
	got, err := c.PodSandboxImages(context.Background())
	if err != nil || len(got) != 0 {
		t.Fatalf("no pods: %v, %v", got, err)
	}
	ctrd.RunContainer(t, "a", testcontainerd.SandboxImage)
	pod, _ := ctrd.RunContainer(t, "b", testcontainerd.SandboxImage)
	ctrd.StopPod(t, pod)
	got, err = c.PodSandboxImages(context.Background())
	if err != nil || !slices.Equal(got, []string{testcontainerd.SandboxImage}) {
		t.Errorf("PodSandboxImages = %v, %v; want the sandbox image once, running and stopped pods alike", got, err)
	}
}
