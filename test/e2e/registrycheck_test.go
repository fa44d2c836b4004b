//go:build linux

package e2e

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/registrycheck"
	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestRegistryCheck: images pulled from a registry on loopback, each run
// by a container that is then gone, so that the node's state file has them
// used within the lookback. A scheduled run that would remove them all
// (the Unused sweep) removes the one its registry still serves, keeps the
// one the registry deleted (gone from registry); with the registry
// stopped, the next run keeps the third (registry unreachable) and still
// keeps the deleted one, from the node's cache of answers.
func TestRegistryCheck(t *testing.T) {
	noderuntime.On(t, "containerd", func(t *testing.T, _ noderuntime.Runtime) {
		ctx := context.Background()
		host, stop, err := testregistry.Listen()
		if err != nil {
			t.Fatal(err)
		}
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				stop()
			}
		})
		c := testcontainerd.Start(t, testcontainerd.WithPlainHTTPRegistries(host))
		n := noderuntime.OfContainerd(c)
		pause := testimage.Pause(t)
		const present, gone, later = "e2e/present:1", "e2e/gone:1", "e2e/later:1"
		for _, tag := range []string{present, gone, later} {
			built, err := testimage.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": pause}, Entrypoint: []string{"/pause"}, RandomBytes: 1024}.Build()
			if err != nil {
				t.Fatal(err)
			}
			if err := testregistry.Push(host, tag, built); err != nil {
				t.Fatalf("pushing %s: %v", tag, err)
			}
			if _, err := c.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: host + "/" + tag}}); err != nil {
				t.Fatalf("pulling %s: %v", tag, err)
			}
		}
		var pods []string
		for i, tag := range []string{present, gone, later} {
			pod, _ := n.RunContainer(t, "app"+string(rune('a'+i)), host+"/"+tag)
			pods = append(pods, pod)
		}
		state := t.TempDir()
		start := time.Now()
		at := func(h int, extra ...string) []string {
			return append([]string{rfc3339(start.Add(time.Duration(h) * time.Hour)), "--state-dir=" + state, "--min-age=1m"}, extra...)
		}
		check := []string{"--registry-check", "--registry-plain-http=" + host, "--registry-timeout=5s"}

		// The first run sees the containers use the images (the collector
		// hands on none of them: they are in use).
		_, rm := scheduled(t, ctx, n.CRIEndpoint(), at(1), check...)
		if rm.Summary.Count(workerresult.Removed) != 0 || rm.Summary.RegistryChecks != nil {
			t.Fatalf("first run: %+v\n%s", rm.Summary, rm.Stderr)
		}
		for _, pod := range pods {
			n.RemovePod(t, pod)
		}
		if err := testregistry.Delete(host, gone); err != nil {
			t.Fatal(err)
		}

		// An hour later, later excluded: present goes, gone stays.
		excl := workertest.ExclusionDir(t, host+"/"+later)
		_, rm = scheduled(t, ctx, n.CRIEndpoint(), at(2, "--exclusion-dir="+excl), check...)
		got := n.ImageIDs(t)
		if _, ok := got[host+"/"+present]; ok || rm.Summary.Count(workerresult.GoneFromRegistry) != 1 {
			t.Fatalf("registry up: present on node %v, summary %+v\n%s", got, rm.Summary, rm.Stderr)
		}
		if _, ok := got[host+"/"+gone]; !ok {
			t.Fatalf("the image its registry deleted was removed\n%s", rm.Stderr)
		}
		rc := rm.Summary.RegistryChecks
		if rc == nil || rc.Counts[string(registrycheck.Present)] != 1 || rc.Counts[string(registrycheck.Gone)] != 1 || rc.Requests != 2 {
			t.Fatalf("registry up: registry checks %+v\n%s", rc, rm.Stderr)
		}

		// The registry stops: later is kept as unreachable, gone is kept
		// by the cached answer.
		stop()
		stopped = true
		_, rm = scheduled(t, ctx, n.CRIEndpoint(), at(3), check...)
		got = n.ImageIDs(t)
		for _, tag := range []string{gone, later} {
			if _, ok := got[host+"/"+tag]; !ok {
				t.Errorf("registry stopped: %s was removed", tag)
			}
		}
		rc = rm.Summary.RegistryChecks
		if rm.Summary.Count(workerresult.RegistryUnreachable) != 1 || rm.Summary.Count(workerresult.GoneFromRegistry) != 1 ||
			rc == nil || rc.Cached != 1 || rc.Counts[string(registrycheck.Unknown)] != 1 {
			t.Fatalf("registry stopped: summary %+v, checks %+v\n%s", rm.Summary, rc, rm.Stderr)
		}

		// whenUnreachable: remove takes the image the registry could not be
		// asked about.
		_, rm = scheduled(t, ctx, n.CRIEndpoint(), at(4), append(check, "--registry-when-unreachable=remove")...)
		got = n.ImageIDs(t)
		if _, ok := got[host+"/"+later]; ok || rm.Summary.Count(workerresult.GoneFromRegistry) != 1 {
			t.Fatalf("remove when unreachable: present %v, summary %+v\n%s", got, rm.Summary, rm.Stderr)
		}
	})
}
