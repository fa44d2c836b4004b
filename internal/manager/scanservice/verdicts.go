package scanservice

import (
	"container/list"
	"sync"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// Scanner is who asks: a scanner pod of a run, as its token proved it.
type Scanner struct {
	Node, Pod, PodUID string
}

// Verdicts holds the cluster's shared verdicts, least recently used first
// out once they pass their byte budget, and the claims on the keys being
// scanned. It locks itself.
type Verdicts struct {
	mu       sync.Mutex
	budget   int64
	used     int64
	byKey    map[scanshare.Key]*list.Element // of *entry
	lru      *list.List                      // front: most recently used
	claims   map[scanshare.Key]claim
	lease    time.Duration
	grant    int
	now      func() time.Time
	counters Counters
	// changed is closed, and replaced, when a verdict is stored or a
	// claim released: what a waiting claim waits for.
	changed chan struct{}
}

type entry struct {
	v    scanshare.Verdict
	size int64
}

type claim struct {
	holder string // pod UID
	until  time.Time
}

// Counters are what the service did since it started.
type Counters struct {
	Served, Stored, Duplicates, Refused, Evicted int
}

// VerdictOptions bound the store.
type VerdictOptions struct {
	// Budget is the bytes the verdicts may take (an estimate of their
	// size in memory); the least recently used go first beyond it.
	Budget int64
	// Lease is how long a claim holds without its verdict: then another
	// scanner may take the key (the holder died or hangs).
	Lease time.Duration
	// Grant is how many keys one request may claim: small, so that the
	// scans of images every node holds spread over the nodes.
	Grant int
	Now   func() time.Time
}

// NewVerdicts returns an empty store.
func NewVerdicts(o VerdictOptions) *Verdicts {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Verdicts{
		budget: o.Budget, lease: o.Lease, grant: max(o.Grant, 1), now: o.Now,
		byKey: map[scanshare.Key]*list.Element{}, lru: list.New(), claims: map[scanshare.Key]claim{},
		changed: make(chan struct{}),
	}
}

// Changed is closed at the next change a waiting claim may take: a verdict
// stored or a claim released.
func (s *Verdicts) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// notify wakes the waiting claims. Called with s.mu held.
func (s *Verdicts) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Claim answers a scanner's claim request.
func (s *Verdicts) Claim(who Scanner, keys []scanshare.Key, retryAfter time.Duration) scanshare.ClaimResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out scanshare.ClaimResponse
	granted := 0
	for _, k := range keys {
		if el, ok := s.byKey[k]; ok {
			s.lru.MoveToFront(el)
			out.Verdicts = append(out.Verdicts, el.Value.(*entry).v)
			s.counters.Served++
			continue
		}
		c, held := s.claims[k]
		switch {
		case held && c.holder == who.PodUID:
			// Asked again while scanning it: still its own.
			c.until = now.Add(s.lease)
			s.claims[k] = c
			out.Scan = append(out.Scan, k)
		case held && now.Before(c.until):
			out.Wait = append(out.Wait, k)
		case granted < s.grant:
			s.claims[k] = claim{holder: who.PodUID, until: now.Add(s.lease)}
			out.Scan = append(out.Scan, k)
			granted++
		default:
			out.Wait = append(out.Wait, k)
		}
	}
	if len(out.Wait) > 0 {
		out.RetryAfter = max(1, int(retryAfter.Round(time.Second)/time.Second))
	}
	return out
}

// Share keeps a scanner's verdicts. The first verdict on a key stays: a
// second one is counted, not stored, so a scanner can neither replace
// another's verdict nor take over a key another holds a claim on.
func (s *Verdicts) Share(who Scanner, req scanshare.ShareRequest) scanshare.ShareResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out scanshare.ShareResponse
	refuse := func(k scanshare.Key, why string) {
		out.Refused = append(out.Refused, scanshare.Refused{Key: k, Reason: why})
		s.counters.Refused++
	}
	changed := false
	defer func() {
		if changed {
			s.notify()
		}
	}()
	for _, k := range req.Released {
		if c, ok := s.claims[k]; ok && c.holder == who.PodUID {
			delete(s.claims, k)
			changed = true
		}
	}
	for _, v := range req.Verdicts {
		if err := v.Key.Validate(); err != nil {
			refuse(v.Key, err.Error())
			continue
		}
		if !scanshare.Shareable(v.Scan.Verdict) {
			refuse(v.Key, "verdict "+v.Scan.Verdict+" is not shared")
			continue
		}
		if err := scanshare.ValidateScan(v.Scan); err != nil {
			refuse(v.Key, err.Error())
			continue
		}
		if _, ok := s.byKey[v.Key]; ok {
			s.counters.Duplicates++
			continue
		}
		if c, ok := s.claims[v.Key]; ok && c.holder != who.PodUID && now.Before(c.until) {
			refuse(v.Key, "another scanner holds the claim on this key")
			continue
		}
		delete(s.claims, v.Key)
		e := &entry{v: scanshare.Verdict{Key: v.Key, Scan: v.Scan, Node: who.Node, Pod: who.Pod, At: now}}
		e.size = sizeOf(e.v)
		s.byKey[v.Key] = s.lru.PushFront(e)
		s.used += e.size
		s.counters.Stored++
		out.Stored++
		changed = true
	}
	s.evict()
	return out
}

// evict drops the least recently used verdicts beyond the budget.
func (s *Verdicts) evict() {
	for s.used > s.budget && s.lru.Len() > 0 {
		el := s.lru.Back()
		e := el.Value.(*entry)
		s.lru.Remove(el)
		delete(s.byKey, e.v.Key)
		s.used -= e.size
		s.counters.Evicted++
	}
}

// Expire forgets the claims whose lease ran out, so that the claim table
// never holds what dead scanners left.
func (s *Verdicts) Expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	expired := false
	for k, c := range s.claims {
		if !now.Before(c.until) {
			delete(s.claims, k)
			expired = true
		}
	}
	if expired {
		s.notify()
	}
}

// Stats are the store's counters, its size and how many keys are claimed.
func (s *Verdicts) Stats() (c Counters, verdicts int, bytes int64, claims int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters, len(s.byKey), s.used, len(s.claims)
}

// sizeOf estimates a verdict's memory: its strings and a fixed overhead
// for the map, the list element and the structs.
func sizeOf(v scanshare.Verdict) int64 {
	n := 256 + len(v.Key.Digest) + len(v.Key.Platform) + len(v.Key.DB) + len(v.Key.Policy) +
		len(v.Node) + len(v.Pod) + len(v.Scan.Verdict)
	for _, f := range v.Scan.Findings {
		n += 64 + len(f.ID) + len(f.Severity) + len(f.Package) + len(f.FixedVersion)
	}
	return int64(n)
}
