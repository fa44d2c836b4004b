//go:build linux

package main

import (
	"archive/tar"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
)

// TestContainerdRunsTheImage imports the linux/amd64 tarball into a real
// containerd the way a kind or kubelet node is loaded ("ctr -n k8s.io
// images import"), finds it under its full reference with the built
// config digest as its ID, and runs it: the entrypoint and the nonroot
// user work. It also imports the OCI layout, packed as a tar, by the name
// its index.json carries.
func TestContainerdRunsTheImage(t *testing.T) {
	b := shared(t)
	c := testcontainerd.Start(t)

	r := b.results[0]
	c.Ctr(t, "images", "import", r.Tarball)
	want, err := r.Image.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ImageIDs(t)[testRef]; got != want.String() {
		t.Fatalf("CRI lists %s as %q, want %s", testRef, got, want)
	}

	_, id := c.RunContainer(t, "pause", testRef)
	st, err := c.Runtime.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %s: %v", st.GetStatus().GetState(), st.GetStatus().GetMessage())
	}

	layoutTar := filepath.Join(t.TempDir(), "layout.tar")
	if err := tarDir(filepath.Join(b.out, "pause"), layoutTar); err != nil {
		t.Fatal(err)
	}
	c.Ctr(t, "images", "rm", testRef)
	c.Ctr(t, "images", "import", "--all-platforms", layoutTar)
	if got := c.ImageIDs(t)[testRef]; got != want.String() {
		t.Fatalf("after importing the layout CRI lists %s as %q, want %s", testRef, got, want)
	}
}

// tarDir packs dir's contents (an OCI layout) into file.
func tarDir(dir, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		if h.Name, err = filepath.Rel(dir, p); err != nil {
			return err
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		_ = f.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
