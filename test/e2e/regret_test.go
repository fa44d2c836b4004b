//go:build linux

package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/regret"
	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestRegretLedger: an image the remover removed, pulled back from its
// registry through CRI as a pod's kubelet would, is one return in the
// node's removal ledger: the scheduled run after it counts it (collector)
// and reports it (remover), with the bytes its removal freed; a later
// remover process neither counts nor reports it again.
func TestRegretLedger(t *testing.T) {
	noderuntime.Each(t, func(t *testing.T, rt noderuntime.Runtime) {
		ctx := context.Background()
		// The registry counts the manifests it serves: a return must be a
		// pull from it, not an image the runtime kept.
		var manifests atomic.Int64
		reg := testregistry.Handler()
		host := testregistry.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/") {
				manifests.Add(1)
			}
			reg.ServeHTTP(w, r)
		}))
		img, err := testimage.Image{Tags: []string{"e2e/regret:1"}, RandomBytes: 1 << 20}.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := testregistry.Push(host, "e2e/regret:1", img); err != nil {
			t.Fatal(err)
		}
		ref := host + "/e2e/regret:1"
		n := rt.Start(t, noderuntime.Options{PlainHTTPRegistries: []string{host}})
		n.PullImage(t, ref)
		// The ID as the runtime lists it, which the ledger keys by (CRI-O's
		// pull answers a repo digest, its listing bare hex).
		id := n.ImageIDs(t)[ref]
		if id == "" {
			t.Fatalf("%s is not listed after its pull: %v", ref, n.ImageIDs(t))
		}
		stateDir := t.TempDir()
		endpoint := "--runtime-endpoint=" + n.CRIEndpoint()
		common := append([]string{"--state-dir=" + stateDir}, rt.WorkerArgs(n)...)
		remover := func(args ...string) run {
			t.Helper()
			r := runWorker(t, ctx, "remover", append(append([]string{endpoint}, common...), args...)...)
			if r.Code != 0 {
				t.Fatalf("remover exit %d, summary %+v\n%s", r.Code, r.Summary, r.Stderr)
			}
			return r
		}

		// The first run removes the image.
		removed := remover("--imagelist="+imageListFile(t, ref), "--min-age=0s", "--run=imagejob-first")
		if removed.Summary.Counts["removed"] != 1 || removed.Summary.Regret != nil || n.ImageIDs(t)[ref] != "" {
			t.Fatalf("first run: summary %+v, present %v\n%s", removed.Summary, n.ImageIDs(t), removed.Stderr)
		}
		ledger, err := regret.Load(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		entry, ok := ledger.Get(id)
		if !ok || !entry.Pending || entry.Bytes != removed.Summary.BytesFreed || entry.Run != "imagejob-first" || entry.Policy != "Listed" || entry.Repository != host+"/e2e/regret" {
			t.Fatalf("the ledger's entry after the removal: %+v (found %v), want pending, %d bytes, imagejob-first, Listed, %s/e2e/regret", entry, ok, removed.Summary.BytesFreed, host)
		}
		// A reading in the removal's second is no return (the ledger's
		// times are seconds): the kubelet's pull comes in a later one.
		for time.Now().Unix() <= entry.RemovedAt.Unix() {
			time.Sleep(100 * time.Millisecond)
		}

		before := manifests.Load()
		n.PullImage(t, ref)
		if back := n.ImageIDs(t)[ref]; back != id {
			t.Fatalf("pulled back %s, want the removed image %s", back, id)
		}
		if manifests.Load() == before {
			t.Fatal("the image came back without a request to its registry")
		}
		pulledBy := time.Now()

		// The next scheduled run: the collector counts the return, the
		// remover tells it. Everything is too young to go.
		_, rm := scheduled(t, ctx, n.CRIEndpoint(), append(append([]string{}, common...), "--min-age=1h"), "--run=imagejob-second")
		got := rm.Summary.Regret
		if got == nil || len(got.Recent) != 1 {
			t.Fatalf("the scheduled run reports no return: %+v\n%s", rm.Summary, rm.Stderr)
		}
		back := got.Recent[0]
		if back.ReturnedAt.Before(entry.RemovedAt) || back.ReturnedAt.After(pulledBy.Add(time.Second)) {
			t.Errorf("returned at %v, want between the removal (%v) and the pull (%v)", back.ReturnedAt, entry.RemovedAt, pulledBy)
		}
		want := &workerresult.Regret{Returns: 1, BytesReturned: entry.Bytes, ByPolicy: map[string]workerresult.RegretTotal{"Listed": {Returns: 1, Bytes: entry.Bytes}},
			Recent: []workerresult.RegretReturn{{Image: id, Repository: host + "/e2e/regret", Bytes: entry.Bytes, Policy: "Listed", Run: "imagejob-first", RemovedAt: entry.RemovedAt, ReturnedAt: back.ReturnedAt}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the scheduled run's regret (-want +got):\n%s", diff)
		}

		// Another remover process: the return is neither counted nor told
		// again.
		again := remover("--imagelist="+imageListFile(t, "example.com/not-here:1"), "--min-age=0s", "--run=imagejob-third")
		if again.Summary.Regret != nil {
			t.Errorf("a later run told the return again: %+v", again.Summary.Regret)
		}
		ledger, err = regret.Load(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := ledger.Get(id)
		wantEntry := regret.Entry{Repository: entry.Repository, Bytes: entry.Bytes, RemovedAt: entry.RemovedAt, Policy: "Listed", Run: "imagejob-first",
			Returns: 1, LastReturnedAt: back.ReturnedAt, BytesReturned: entry.Bytes}
		if diff := cmp.Diff(wantEntry, after); diff != "" {
			t.Errorf("the ledger's entry at the end (-want +got):\n%s", diff)
		}
		if n, last := ledger.Returns(id); n != 1 || !last.Equal(back.ReturnedAt) {
			t.Errorf("Returns = %d, %v; want 1, %v", n, last, back.ReturnedAt)
		}
	})
}
