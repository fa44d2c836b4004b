package scanservice

import (
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is a token bucket: Rate requests a second on average, Burst at
// once. The zero Limit bounds nothing.
type Limit struct {
	Rate  rate.Limit
	Burst int
}

// maxBuckets bounds a limitTable: past it, the keys it has not seen share
// one bucket, rather than the table growing with every address an attacker
// can send from.
const maxBuckets = 16384

// limitTable is a token bucket per key (a source address, a pod).
type limitTable struct {
	limit Limit
	// idle is how long a bucket unused is kept: by then it is full again,
	// so that forgetting it changes nothing.
	idle time.Duration

	mu       sync.Mutex
	buckets  map[string]*bucket
	overflow *rate.Limiter
	swept    time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newLimitTable(l Limit) *limitTable {
	if l.Rate <= 0 || l.Burst <= 0 {
		return nil
	}
	idle := time.Duration(float64(l.Burst) / float64(l.Rate) * float64(time.Second))
	return &limitTable{limit: l, idle: max(idle, time.Second), buckets: map[string]*bucket{}, overflow: rate.NewLimiter(l.Rate, l.Burst)}
}

// allow takes a token from key's bucket, or says how long until one is
// there. A nil table allows everything.
func (t *limitTable) allow(key string, now time.Time) (bool, time.Duration) {
	if t == nil {
		return true, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	if b == nil {
		if len(t.buckets) >= maxBuckets && now.Sub(t.swept) >= t.idle {
			maps.DeleteFunc(t.buckets, func(_ string, b *bucket) bool { return now.Sub(b.last) >= t.idle })
			t.swept = now
		}
		if len(t.buckets) < maxBuckets {
			b = &bucket{lim: rate.NewLimiter(t.limit.Rate, t.limit.Burst)}
			t.buckets[key] = b
		} else {
			b = &bucket{lim: t.overflow}
		}
	}
	b.last = now
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	return false, untilToken(b.lim, now)
}

// untilToken is how long lim takes to hold a whole token again.
func untilToken(lim *rate.Limiter, now time.Time) time.Duration {
	if lim.Limit() <= 0 {
		return time.Second
	}
	return time.Duration((1 - lim.TokensAt(now)) / float64(lim.Limit()) * float64(time.Second))
}
