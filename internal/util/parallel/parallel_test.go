package parallel

import (
	"sync/atomic"
	"testing"
)

func TestFor(t *testing.T) {
	cases := map[string]struct{ workers, n int }{
		"more work than workers": {workers: 3, n: 100},
		"more workers than work": {workers: 16, n: 2},
		"no work":                {workers: 4, n: 0},
		"no workers given":       {workers: 0, n: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := make([]int32, tc.n)
			var running, peak atomic.Int32
			For(tc.workers, tc.n, func(i int) {
				now := running.Add(1)
				for {
					p := peak.Load()
					if now <= p || peak.CompareAndSwap(p, now) {
						break
					}
				}
				atomic.AddInt32(&calls[i], 1)
				running.Add(-1)
			})
			for i, c := range calls {
				if c != 1 {
					t.Errorf("f(%d) called %d times, want once", i, c)
				}
			}
			if limit := int32(max(1, tc.workers)); peak.Load() > limit {
				t.Errorf("%d calls at once, want at most %d", peak.Load(), limit)
			}
		})
	}
}
