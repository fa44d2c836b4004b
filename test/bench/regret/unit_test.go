package regret

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The same seed gives the same trace: every policy replays the same one.
func TestTracesAreSeeded(t *testing.T) {
	for _, mk := range []func(uint64) *Trace{WebFleet, CIRunners, TagBumps, CronJobs} {
		a, b := mk(7), mk(7)
		if len(a.Events) == 0 || len(a.Images) == 0 {
			t.Fatalf("%s: an empty trace", a.Name)
		}
		if len(a.Events) != len(b.Events) || len(a.Images) != len(b.Images) {
			t.Fatalf("%s: two traces of one seed differ in size", a.Name)
		}
		for i := range a.Events {
			if a.Events[i] != b.Events[i] {
				t.Fatalf("%s: event %d differs: %+v, %+v", a.Name, i, a.Events[i], b.Events[i])
			}
		}
		for i := 1; i < len(a.Events); i++ {
			if a.Events[i].At.Before(a.Events[i-1].At) {
				t.Fatalf("%s: events out of order at %d", a.Name, i)
			}
		}
	}
}

// The kubelet's own collector, on the scaled clock, removes the least
// recently used image first and nothing younger than its minimum age.
func TestKubeletOnScaledClock(t *testing.T) {
	b := newBuilder("probe", 1, 1, 10*GiB, 0)
	old := b.image("registry.example/p/old", "1", 3*GiB, Start, true)
	recent := b.image("registry.example/p/recent", "1", 3*GiB, Start, true)
	fresh := b.image("registry.example/p/fresh", "1", 3*GiB, Start, true)
	b.run(Start, 0, old, -1, time.Minute, 0)
	b.run(Start.Add(10*time.Minute), 0, recent, -1, time.Minute, 0)
	tr := b.done()
	m := &Metrics{}
	n := newNode(0, tr, m)
	gc, err := newKubeletGC(n, 60000)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := Start
	step := func(events ...Event) {
		for _, e := range events {
			n.apply(e)
		}
		gc.collect(ctx, n, at)
		at = at.Add(ImageGCPeriod)
	}
	ev := tr.Events
	step(ev[0])                                // old runs: 30% used
	step(ev[1], ev[2])                         // old exits and goes
	step(ev[3])                                // recent runs: 60%
	step(ev[4], ev[5])                         // recent exits and goes
	n.ensure(fresh, Start.Add(20*time.Minute)) // 90%: over the high threshold
	step()
	got := map[string]bool{}
	for idx := range n.images {
		got[tr.Images[idx].Repo] = true
	}
	want := map[string]bool{"registry.example/p/recent": true, "registry.example/p/fresh": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("images left (-want +got):\n%s", diff)
	}
}

func TestJudge(t *testing.T) {
	k := &Result{Profile: "p", Policy: "kubelet", Metrics: &Metrics{RepulledBytes: 10 * GiB, PeakPercent: 86}}
	cases := map[string]struct {
		m    Metrics
		want bool
	}{
		"half the re-pulls at the same peak": {Metrics{RepulledBytes: 5 * GiB, PeakPercent: 86.5}, true},
		"more than half":                     {Metrics{RepulledBytes: 6 * GiB, PeakPercent: 80}, false},
		"a failed start":                     {Metrics{FailedStarts: 1, PeakPercent: 80}, false},
		"a higher peak":                      {Metrics{PeakPercent: 88}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := c.m
			if got := Judge(k, &Result{Profile: "p", Policy: "x", Metrics: &m}); got.Met != c.want {
				t.Errorf("met = %v, want %v (%s)", got.Met, c.want, got.Headline)
			}
		})
	}
}
