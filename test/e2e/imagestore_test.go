//go:build linux

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// TestImageAgeFromTheStore: CRI-O only, because only there do the ages
// come from the image store: containerd's CRI tells pull times itself
// (TestMinimumAge shows them), CRI-O's CRI tells none, but its image store
// records them. A month after the pull, the first run on the node (a fresh
// state directory) with a minimum age of a week removes the unused images
// when it reads the store, as the pod spec has it on CRI-O; without the
// store, ages count from first sight and the same run removes nothing.
func TestImageAgeFromTheStore(t *testing.T) {
	noderuntime.On(t, "crio", func(t *testing.T, rt noderuntime.Runtime) {
		imageAgeFromTheStore(t, seedOn(t, rt, noderuntime.Options{}))
	})
}

func imageAgeFromTheStore(t *testing.T, n *workerNode) {
	monthLater := time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	excl := workertest.ExclusionDir(t, keepExact, "example.com/protected/*")
	run := func(extra ...string) run {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := append([]string{"--imagelist=" + imageListFile(t, "*"), "--runtime-endpoint=" + n.CRIEndpoint(), "--exclusion-dir=" + excl,
			"--min-age=168h", "--now=" + monthLater, "--dry-run"}, extra...)
		r := runWorker(t, ctx, "remover", args...)
		if r.Code != 0 {
			t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
		}
		return r
	}
	firstSight := run()
	if firstSight.Summary.AgeSource != "first seen" || firstSight.Summary.Counts["removed"] != 0 || firstSight.Summary.Counts["too young"] != n.removable {
		t.Errorf("without the store: age source %q, counts %v; want first seen, %d too young", firstSight.Summary.AgeSource, firstSight.Summary.Counts, n.removable)
	}
	store := run("--image-store=" + n.RootDir())
	if store.Summary.AgeSource != "runtime" || store.Summary.Counts["removed"] != n.removable {
		t.Errorf("with the store: age source %q, counts %v; want runtime, %d removed (a dry run)\n%s", store.Summary.AgeSource, store.Summary.Counts, n.removable, store.Stderr)
	}
}
