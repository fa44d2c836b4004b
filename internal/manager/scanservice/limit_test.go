package scanservice

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLimitTable: each key has its own bucket; a bucket left idle until it
// is full again is forgotten; keys past the table's bound share one.
func TestLimitTable(t *testing.T) {
	now := time.Now()
	tab := newLimitTable(Limit{Rate: 1, Burst: 3})
	take := func(key string, n int) (allowed int, wait time.Duration) {
		for range n {
			ok, w := tab.allow(key, now)
			if ok {
				allowed++
			} else {
				wait = w
			}
		}
		return allowed, wait
	}
	type got struct {
		Allowed int
		Waits   bool
	}
	for _, step := range []struct {
		key     string
		n       int
		advance time.Duration
		want    got
	}{
		{key: "a", n: 5, want: got{Allowed: 3, Waits: true}},
		{key: "b", n: 2, want: got{Allowed: 2}},
		{key: "a", n: 2, advance: time.Second, want: got{Allowed: 1, Waits: true}},
		{key: "a", n: 4, advance: 3 * time.Second, want: got{Allowed: 3, Waits: true}},
	} {
		now = now.Add(step.advance)
		allowed, wait := take(step.key, step.n)
		if diff := cmp.Diff(step.want, got{allowed, wait > 0 && wait <= time.Second}); diff != "" {
			t.Errorf("%s after %v (-want +got):\n%s", step.key, step.advance, diff)
		}
	}

	tab = newLimitTable(Limit{Rate: 1, Burst: 3})
	for i := range maxBuckets {
		tab.allow(fmt.Sprint("k", i), now)
	}
	if len(tab.buckets) != maxBuckets {
		t.Fatalf("%d buckets, want the bound %d", len(tab.buckets), maxBuckets)
	}
	// New keys past the bound share one bucket.
	allowed, _ := take("new-1", 2)
	more, _ := take("new-2", 2)
	if allowed+more != 3 {
		t.Errorf("new keys past the bound got %d requests, want the one shared burst of 3", allowed+more)
	}
	// Once the old buckets are full again they are dropped for new ones.
	now = now.Add(3 * time.Second)
	if allowed, _ := take("new-3", 3); allowed != 3 || len(tab.buckets) > 10 {
		t.Errorf("after the idle time: %d allowed, %d buckets kept", allowed, len(tab.buckets))
	}
	if ok, _ := (*limitTable)(nil).allow("x", now); !ok || newLimitTable(Limit{}) != nil {
		t.Error("the zero Limit bounds something")
	}
}
