package nodequeue

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeBusy is the cache's unfinished worker pods, by node.
type fakeBusy struct {
	mu      sync.Mutex
	workers map[string][]Worker
	// err fails Busy, errOn BusyOn.
	err, errOn error
}

func newFakeBusy() *fakeBusy { return &fakeBusy{workers: map[string][]Worker{}} }

func (f *fakeBusy) Busy() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ws := range f.workers {
		n += len(ws)
	}
	return n, f.err
}

func (f *fakeBusy) BusyOn(node string) ([]Worker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.workers[node]), f.errOn
}

func (f *fakeBusy) add(job, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers[node] = append(f.workers[node], Worker{Job: job})
}

func (f *fakeBusy) remove(job, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers[node] = slices.DeleteFunc(f.workers[node], func(w Worker) bool { return w.Job == job })
}

// takeFree takes every free node of nodes, up to the room, and leaves the
// held ones waiting: a wave's choice, reduced to the queue's part.
func takeFree(nodes []string, got *Offer) func(Offer) Choice {
	return func(s Offer) Choice {
		if got != nil {
			*got = Offer{Headroom: s.Headroom, Bounded: s.Bounded}
		}
		var t Choice
		for _, n := range nodes {
			switch {
			case s.HeldBy(n) != "":
				t.Waiting = append(t.Waiting, n)
			case s.Bounded && len(t.Create) >= s.Headroom:
				t.AtBound = true
			default:
				t.Create = append(t.Create, n)
			}
		}
		return t
	}
}

// TestQueueTake: what a wave may take as the runs before it took theirs,
// their pods showed in the cache, were released or ended.
func TestQueueTake(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	list := Rank{Created: at, Name: "list"}
	sched := Rank{Scheduled: true, Created: at.Add(-time.Hour), Name: "sched"}
	late := Rank{Created: at.Add(time.Hour), Name: "late"}
	early := Rank{Created: at.Add(-time.Minute), Name: "early"}
	take := func(q *Queue, r Rank, bound int, choose func(Offer) Choice) error {
		return q.Take(r.Name, "", r, bound, choose)
	}
	type result struct {
		Create, Waiting []string
		AtBound         bool
		Holders         map[string]string
		Headroom        int
		Bounded         bool
	}
	cases := map[string]struct {
		// before runs against the queue and its cache first.
		before func(q *Queue, busy *fakeBusy)
		bound  int
		want   result
	}{
		"an empty queue: every node": {
			want: result{Create: []string{"a", "b"}, Holders: map[string]string{}},
		},
		"a node another run claimed waits for it": {
			before: func(q *Queue, _ *fakeBusy) {
				_ = take(q, sched, 0, takeFree([]string{"a"}, nil))
			},
			want: result{Create: []string{"b"}, Waiting: []string{"a"}, Holders: map[string]string{"a": "sched"}},
		},
		"a claim released while the cache shows the pod: the pod holds the node": {
			before: func(q *Queue, busy *fakeBusy) {
				_ = take(q, sched, 0, takeFree([]string{"a"}, nil))
				busy.add("sched", "a")
				q.Release("sched", "a")
			},
			want: result{Create: []string{"b"}, Waiting: []string{"a"}, Holders: map[string]string{"a": "sched"}},
		},
		"a run that left frees its claims": {
			before: func(q *Queue, _ *fakeBusy) {
				_ = take(q, sched, 0, takeFree([]string{"a", "b"}, nil))
				q.Leave("sched")
			},
			want: result{Create: []string{"a", "b"}, Holders: map[string]string{}},
		},
		"a run queued for the node that ranks first goes first": {
			before: func(q *Queue, busy *fakeBusy) {
				busy.add("other", "a")
				_ = take(q, early, 0, takeFree([]string{"a"}, nil))
				busy.remove("other", "a")
			},
			want: result{Create: []string{"b"}, Waiting: []string{"a"}, Holders: map[string]string{"a": "early"}},
		},
		"runs queued for the node that rank after are passed: a later list, a schedule": {
			before: func(q *Queue, busy *fakeBusy) {
				busy.add("other", "a")
				_ = take(q, late, 0, takeFree([]string{"a"}, nil))
				_ = take(q, sched, 0, takeFree([]string{"a"}, nil))
				busy.remove("other", "a")
			},
			want: result{Create: []string{"a", "b"}, Holders: map[string]string{}},
		},
		"the bound counts the claims the cache does not show yet": {
			before: func(q *Queue, busy *fakeBusy) {
				busy.add("sched", "x")
				_ = take(q, sched, 0, takeFree([]string{"y"}, nil))
			},
			bound: 3,
			want:  result{Create: []string{"a"}, AtBound: true, Holders: map[string]string{}, Headroom: 1, Bounded: true},
		},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		busy := newFakeBusy()
		q := New(busy)
		if tc.before != nil {
			tc.before(q, busy)
		}
		var s Offer
		var holders map[string]string
		choose := takeFree([]string{"a", "b"}, &s)
		err := take(q, list, tc.bound, func(in Offer) Choice {
			holders = map[string]string{}
			for _, n := range []string{"a", "b"} {
				if h := in.HeldBy(n); h != "" {
					holders[n] = h
				}
			}
			return choose(in)
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tk := choose(Offer{Headroom: s.Headroom, Bounded: s.Bounded, HeldBy: func(n string) string { return holders[n] }})
		got[name] = result{Create: tk.Create, Waiting: tk.Waiting, AtBound: tk.AtBound, Holders: holders, Headroom: s.Headroom, Bounded: s.Bounded}
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Take (-want +got):\n%s", diff)
	}
}

// TestQueueEarlierRunHolds: a worker of an earlier run under the same job
// name (deleted and created again) holds its node against the new run.
func TestQueueEarlierRunHolds(t *testing.T) {
	busy := newFakeBusy()
	busy.workers["a"] = []Worker{{Job: "j", Run: "old"}}
	q := New(busy)
	var holder string
	if err := q.Take("j", "new", Rank{Name: "j"}, 0, func(s Offer) Choice { holder = s.HeldBy("a"); return Choice{} }); err != nil {
		t.Fatal(err)
	}
	if holder != "j" {
		t.Errorf("holder of a node with the earlier run's worker = %q, want j", holder)
	}
}

// TestQueueCacheNotSynced: a cache that cannot count the pods in flight
// fails the take, which records nothing; one that cannot list a node's
// pods holds the node (waiting is the safe answer).
func TestQueueCacheNotSynced(t *testing.T) {
	rank := Rank{Name: "j"}
	busy := newFakeBusy()
	busy.err = errors.New("not synced")
	q := New(busy)
	if err := q.Take("j", "", rank, 0, takeFree([]string{"a"}, nil)); err == nil {
		t.Error("a take with an unsynced cache succeeded")
	}
	if len(q.claims) != 0 || len(q.parked) != 0 {
		t.Errorf("a failed take recorded claims %v, parked %v", q.claims, q.parked)
	}
	busy = newFakeBusy()
	busy.errOn = errors.New("not synced")
	q = New(busy)
	var holder string
	if err := q.Take("j", "", rank, 0, func(s Offer) Choice { holder = s.HeldBy("a"); return Choice{} }); err != nil {
		t.Fatal(err)
	}
	if holder == "" {
		t.Error("a node the cache cannot answer for is free")
	}
}

// TestQueueWakeable: a run that waits for a node or for room sleeps until
// a worker ends; one that took all it wanted, or left, does not.
func TestQueueWakeable(t *testing.T) {
	busy := newFakeBusy()
	busy.add("other", "a")
	q := New(busy)
	for _, r := range []Rank{{Name: "waits"}, {Name: "starved"}, {Name: "done"}, {Name: "gone"}} {
		nodes := map[string][]string{"waits": {"a"}, "starved": {"b", "c"}, "done": {"d"}, "gone": {"a"}}[r.Name]
		bound := map[string]int{"starved": 2}[r.Name]
		if err := q.Take(r.Name, "", r, bound, takeFree(nodes, nil)); err != nil {
			t.Fatal(err)
		}
	}
	q.Leave("gone")
	got := q.Wakeable()
	slices.Sort(got)
	if diff := cmp.Diff([]string{"starved", "waits"}, got); diff != "" {
		t.Errorf("Wakeable (-want +got):\n%s", diff)
	}
}

// TestQueueNeverTwoWorkersOnANode: many runs' passes at once, each taking
// what is free of a few shared nodes, its pods showing in the cache, then
// ending: no node is ever held by two runs, and the bound on pods in
// flight is never passed. The race tier runs it under -race.
func TestQueueNeverTwoWorkersOnANode(t *testing.T) {
	const runs, passes, bound = 8, 50, 3
	nodes := []string{"a", "b", "c", "d"}
	busy := newFakeBusy()
	q := New(busy)
	var mu sync.Mutex
	on := map[string]string{}
	var violations []string
	var wg sync.WaitGroup
	for r := range runs {
		rank := Rank{Scheduled: r%2 == 0, Created: time.Unix(int64(r), 0), Name: fmt.Sprintf("run-%d", r)}
		job := rank.Name
		wg.Go(func() {
			for range passes {
				var mine []string
				err := q.Take(job, "", rank, bound, func(s Offer) Choice {
					t := takeFree(nodes, nil)(s)
					mu.Lock()
					for _, n := range t.Create {
						if h := on[n]; h != "" {
							violations = append(violations, fmt.Sprintf("%s took %s, held by %s", job, n, h))
						}
						on[n] = job
					}
					if len(on) > bound {
						violations = append(violations, fmt.Sprintf("%d pods in flight, bound %d", len(on), bound))
					}
					mu.Unlock()
					mine = t.Create
					return t
				})
				if err != nil {
					t.Error(err)
					return
				}
				// The pods show in the cache, the claims go; then they end.
				for _, n := range mine {
					busy.add(job, n)
				}
				q.Release(job, mine...)
				runtime.Gosched()
				for _, n := range mine {
					mu.Lock()
					delete(on, n)
					mu.Unlock()
					busy.remove(job, n)
				}
				_ = q.Wakeable()
			}
			q.Leave(job)
		})
	}
	wg.Wait()
	if len(violations) > 0 {
		t.Errorf("%d violations, first: %s", len(violations), violations[0])
	}
}
