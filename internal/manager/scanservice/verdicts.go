package scanservice

import (
	"cmp"
	"container/list"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Scanner is who asks: a scanner pod of a run, as its token proved it.
type Scanner struct {
	Node, Pod, PodUID string
	// Job is the UID of the run whose audience the token carried.
	Job string
}

// Verdicts holds the cluster's shared verdicts and the claims on the keys
// being scanned. It locks itself.
//
// A scanner is assumed compromisable (it parses tenants' images as root),
// so what one scanner may do to the others is bounded:
//   - it shares a verdict only for a key it claimed and was handed, and a
//     claim is handed only for a key it asked about and nobody holds;
//   - a verdict that removes (vulnerable, end of life) is served to another
//     node only once a scanner of a second node, handed the key to confirm
//     it, reached the same verdict. A verdict that keeps the image is taken
//     on one node's word, first or second: it can only keep. When the second
//     removes for other reasons (other findings), a third node's scan
//     decides between the two; when all three differ, every node scans the
//     image itself. So no node removes on one scanner's word, and a lie
//     costs the cluster no scan it would not have made;
//   - it holds at most MaxClaims claims and PerScanner bytes of verdicts;
//     its claims are never renewed (only a share or the lease ends one),
//     and a key whose claim it let lapse is not handed to it again;
//   - the verdicts of a run that no second node confirmed are forgotten
//     when the run ends; only confirmed ones serve later runs, and only
//     those of the DB and policy the newest run used, least recently used
//     first out beyond the budget.
type Verdicts struct {
	mu         sync.Mutex
	budget     int64
	perScanner int64
	maxClaims  int
	used       int64
	byKey      map[scanshare.Key]*record
	// settled are the confirmed verdicts of ended runs, least recently
	// used at the back: the only ones the budget evicts, so that no flood
	// of a live run's scanners pushes a verdict out.
	settled  *list.List // of *record
	claims   map[scanshare.Key]claim
	runs     map[string]*run
	lease    time.Duration
	grant    int
	now      func() time.Time
	log      logr.Logger
	live     func(job string) bool
	counters Counters
	// changed is closed, and replaced, when a verdict is stored or
	// confirmed, or a claim released: what a waiting claim waits for.
	changed chan struct{}
}

// record is a stored verdict and what the service knows of it.
type record struct {
	v scanshare.Verdict
	// job and podUID made it; confirmedBy is the node whose scanner
	// reached the same verdict. rival is a second node's contrary verdict,
	// which a third node's decides against v; disputed, all three differed.
	job, podUID string
	confirmedBy string
	rival       *scanshare.Verdict
	disputed    bool
	size        int64
	// settledAt is its place in settled once its run ended; nil before.
	settledAt *list.Element
}

type claim struct {
	holder, job string // pod UID, run
	until       time.Time
	// confirm: the key has a verdict that removes, which this claim's
	// holder scans again to confirm or dispute.
	confirm bool
}

// run is what one live run's scanners hold.
type run struct {
	pods map[string]*usage // by pod UID
}

type usage struct {
	claims int
	bytes  int64
	// partitions are the DBs and policies the scanner asked about.
	partitions map[partition]bool
	// lapsed are the keys whose claim it let lapse: never handed to it
	// again in the run, so that it cannot hold a key lease after lease.
	lapsed map[scanshare.Key]bool
}

// maxLapsed bounds the lapsed keys remembered per scanner: an honest one
// lets a claim lapse only when its scan outlasts the lease.
const maxLapsed = 1024

type partition struct{ db, policy string }

func partitionOf(k scanshare.Key) partition { return partition{k.DB, k.Policy} }

// maxPartitions bounds the DBs and policies one scanner may name: a run
// has one of each; a forged key names another, which stays unremembered.
const maxPartitions = 2

// Counters are what the service did since it started.
type Counters struct {
	Served, Stored, Duplicates, Refused, Evicted int
	// Confirmed counts verdicts another node's scan agreed with;
	// Contradicted those a second node's scan did not; Overruled those a
	// third node's then found wrong; Disputed those where all three
	// differed; Forgotten the unconfirmed verdicts dropped when their run
	// ended.
	Confirmed, Contradicted, Overruled, Disputed, Forgotten int
}

// VerdictOptions bound the store.
type VerdictOptions struct {
	// Budget is the bytes the verdicts may take (an estimate of their
	// size in memory). Beyond it, settled verdicts go, least recently used
	// first; with none left, new verdicts are refused (their images are
	// scanned on each node).
	Budget int64
	// PerScanner is the bytes of verdicts one scanner pod may have stored
	// in its run; zero means Budget/16.
	PerScanner int64
	// Lease is how long a claim holds without its verdict: then another
	// scanner may take the key (the holder died or hangs).
	Lease time.Duration
	// Grant is how many keys one request may claim: small, so that the
	// scans of images every node holds spread over the nodes.
	Grant int
	// MaxClaims is how many claims one scanner may hold at once; zero
	// means twice Grant.
	MaxClaims int
	Now       func() time.Time
	// Log is told of verdicts other nodes' scans contradicted.
	Log logr.Logger
	// Live says whether the run with this job UID is still running; nil,
	// every run is. Asked when a run's first request comes and by EndRuns,
	// so that a new run never takes an ended one's unconfirmed verdicts.
	Live func(job string) bool
}

// NewVerdicts returns an empty store.
func NewVerdicts(o VerdictOptions) *Verdicts {
	if o.Now == nil {
		o.Now = time.Now
	}
	grant := max(o.Grant, 1)
	if o.MaxClaims <= 0 {
		o.MaxClaims = 2 * grant
	}
	if o.PerScanner <= 0 {
		o.PerScanner = o.Budget / 16
	}
	return &Verdicts{
		budget: o.Budget, perScanner: o.PerScanner, maxClaims: o.MaxClaims, lease: o.Lease, grant: grant, now: o.Now, log: o.Log, live: o.Live,
		byKey: map[scanshare.Key]*record{}, settled: list.New(), claims: map[scanshare.Key]claim{}, runs: map[string]*run{},
		changed: make(chan struct{}),
	}
}

// SetLive sets VerdictOptions.Live, for a store made before the client
// that answers it.
func (s *Verdicts) SetLive(live func(job string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = live
}

// Changed is closed at the next change a waiting claim may take.
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

// removes says whether a verdict makes a node remove the image: such a
// verdict needs a second node's before it reaches a third.
func removes(verdict string) bool { return verdict == "vulnerable" || verdict == "end-of-life" }

// servable says whether rec may be handed to who instead of a scan.
func (rec *record) servable(who Scanner) bool {
	switch {
	case rec.disputed, rec.rival != nil:
		return false
	case !removes(rec.v.Scan.Verdict) || rec.confirmedBy != "":
		return true
	default:
		// Its own node's word is enough for a node.
		return rec.v.Node == who.Node
	}
}

// madeOn says whether one of rec's verdicts was made on node.
func (rec *record) madeOn(node string) bool {
	return rec.v.Node == node || rec.rival != nil && rec.rival.Node == node
}

// usage is who's account in its run, made on first use.
func (s *Verdicts) usage(who Scanner) *usage {
	r := s.runs[who.Job]
	if r == nil {
		// A new run: the runs that ended meanwhile end now, before it
		// is answered.
		s.endRuns()
		r = &run{pods: map[string]*usage{}}
		s.runs[who.Job] = r
	}
	u := r.pods[who.PodUID]
	if u == nil {
		u = &usage{partitions: map[partition]bool{}, lapsed: map[scanshare.Key]bool{}}
		r.pods[who.PodUID] = u
	}
	return u
}

// saw remembers the DB and policy a scanner asked about.
func (u *usage) saw(k scanshare.Key) {
	if len(u.partitions) < maxPartitions {
		u.partitions[partitionOf(k)] = true
	}
}

// Claim answers a scanner's claim request.
func (s *Verdicts) Claim(who Scanner, keys []scanshare.Key, retryAfter time.Duration) scanshare.ClaimResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	u := s.usage(who)
	var out scanshare.ClaimResponse
	granted, answer := 0, 0
	take := func(k scanshare.Key, confirm bool) bool {
		if granted >= s.grant || u.claims >= s.maxClaims || u.lapsed[k] {
			return false
		}
		s.claims[k] = claim{holder: who.PodUID, job: who.Job, until: now.Add(s.lease), confirm: confirm}
		u.claims++
		granted++
		return true
	}
	for _, k := range keys {
		u.saw(k)
		rec := s.byKey[k]
		if rec != nil && rec.servable(who) {
			size := int(rec.size)
			if answer+size > scanshare.MaxBody-scanshare.MaxBody/8 {
				// Kept for the next answer, which the scanner asks at
				// once: no answer outgrows what a scanner reads.
				out.Wait = append(out.Wait, k)
				continue
			}
			answer += size
			if rec.settledAt != nil {
				s.settled.MoveToFront(rec.settledAt)
			}
			out.Verdicts = append(out.Verdicts, rec.v)
			s.counters.Served++
			continue
		}
		if rec != nil && (rec.disputed || rec.confirmedBy != "" || rec.madeOn(who.Node)) {
			// Disputed, or this node's own verdict is in question: it
			// judges the image itself. (Confirmed but not servable cannot
			// be.)
			continue
		}
		c, held := s.claims[k]
		switch {
		case held && c.holder == who.PodUID:
			// Asked again while scanning it: still its own, but the lease
			// is not renewed, so no scanner holds a key for ever.
			out.Scan = append(out.Scan, k)
		case held && now.Before(c.until):
			out.Wait = append(out.Wait, k)
		case held:
			s.lapse(k, c)
			fallthrough
		default:
			if take(k, rec != nil) {
				out.Scan = append(out.Scan, k)
			} else {
				out.Wait = append(out.Wait, k)
			}
		}
	}
	if len(out.Wait) > 0 {
		out.RetryAfter = max(1, int(retryAfter.Round(time.Second)/time.Second))
	}
	return out
}

// drop forgets a claim and its holder's count of it.
func (s *Verdicts) drop(k scanshare.Key, c claim) {
	delete(s.claims, k)
	if r := s.runs[c.job]; r != nil {
		if u := r.pods[c.holder]; u != nil && u.claims > 0 {
			u.claims--
		}
	}
}

// lapse drops a claim whose lease ran out, and remembers that its holder
// let it lapse.
func (s *Verdicts) lapse(k scanshare.Key, c claim) {
	s.drop(k, c)
	if r := s.runs[c.job]; r != nil {
		if u := r.pods[c.holder]; u != nil && len(u.lapsed) < maxLapsed {
			u.lapsed[k] = true
		}
	}
}

// Share keeps a scanner's verdicts on the keys it was handed. The first
// verdict on a key stays; a second node's, on a key handed to it to
// confirm, confirms or disputes it.
func (s *Verdicts) Share(who Scanner, req scanshare.ShareRequest) scanshare.ShareResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	u := s.usage(who)
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
			s.drop(k, c)
			changed = true
		}
	}
	for _, v := range req.Verdicts {
		if why := invalid(v); why != "" {
			refuse(v.Key, why)
			continue
		}
		c, held := s.claims[v.Key]
		if !held || c.holder != who.PodUID {
			if rec := s.byKey[v.Key]; rec != nil && rec.podUID == who.PodUID {
				s.counters.Duplicates++
				continue
			}
			refuse(v.Key, "this scanner was not handed this key to scan")
			continue
		}
		s.drop(v.Key, c)
		changed = true
		if rec := s.byKey[v.Key]; rec != nil {
			s.second(rec, who, v, c.confirm, refuse)
			continue
		}
		rec := &record{v: scanshare.Verdict{Key: v.Key, Scan: v.Scan, Node: who.Node, Pod: who.Pod, At: now}, job: who.Job, podUID: who.PodUID}
		rec.size = sizeOf(rec.v)
		if u.bytes+rec.size > s.perScanner {
			refuse(v.Key, "this scanner's share of the store is full")
			continue
		}
		s.evict(rec.size)
		if s.used+rec.size > s.budget {
			refuse(v.Key, "the store is full")
			continue
		}
		s.byKey[v.Key] = rec
		s.used += rec.size
		u.bytes += rec.size
		s.counters.Stored++
		out.Stored++
	}
	return out
}

// invalid says why a shared verdict cannot be stored, or "".
func invalid(v scanshare.Shared) string {
	if err := v.Key.Validate(); err != nil {
		return err.Error()
	}
	if !scanshare.Shareable(v.Scan.Verdict) {
		return "verdict " + v.Scan.Verdict + " is not shared"
	}
	if err := scanshare.ValidateScan(v.Scan); err != nil {
		return err.Error()
	}
	if v.Scan.From != nil {
		// The origin is the service's to say, from the token.
		return "a shared verdict names no origin: the service records who sent it"
	}
	return ""
}

// second takes the verdict of a scanner that was handed rec's key again:
// to confirm it or to decide between it and a rival, or because the first
// holder's claim had lapsed (counted, not stored).
func (s *Verdicts) second(rec *record, who Scanner, v scanshare.Shared, confirm bool, refuse func(scanshare.Key, string)) {
	if !confirm || rec.confirmedBy != "" || rec.disputed || rec.madeOn(who.Node) {
		s.counters.Duplicates++
		return
	}
	defer s.resize(rec)
	mine := scanshare.Verdict{Key: v.Key, Scan: v.Scan, Node: who.Node, Pod: who.Pod, At: s.now()}
	switch {
	case agree(rec.v.Scan, v.Scan):
		rec.confirmedBy, rec.v.ConfirmedBy, rec.rival = who.Node, who.Node, nil
		s.counters.Confirmed++
	case !removes(v.Scan.Verdict):
		// A verdict that keeps the image is taken on one node's word, as
		// it is when it comes first: it replaces the removing verdict it
		// contradicts, which no other node then acts on.
		s.counters.Contradicted++
		s.log.Info("a node's scan contradicts another node's shared verdict, which no other node acts on: one of the two scanners may be compromised or broken",
			"image", v.Key.Digest, "node", rec.v.Node, "verdict", rec.v.Scan.Verdict, "contradictedBy", who.Node, "verdictOfIt", v.Scan.Verdict)
		rec.v, rec.rival, rec.job, rec.podUID = mine, nil, who.Job, who.PodUID
	case rec.rival == nil:
		s.counters.Contradicted++
		s.log.Info("a node's scan contradicts another node's shared verdict: a third node's decides; one of the two scanners may be compromised or broken",
			"image", v.Key.Digest, "node", rec.v.Node, "verdict", rec.v.Scan.Verdict, "contradictedBy", who.Node, "verdictOfIt", v.Scan.Verdict)
		rec.rival = &mine
	case agree(rec.rival.Scan, v.Scan):
		s.counters.Overruled++
		s.log.Info("two nodes' scans overruled a node's verdict: its scanner may be compromised or broken", "image", v.Key.Digest,
			"node", rec.v.Node, "verdict", rec.v.Scan.Verdict, "overruledBy", []string{rec.rival.Node, who.Node}, "verdictOfBoth", v.Scan.Verdict)
		rec.v, rec.rival = *rec.rival, nil
		rec.confirmedBy, rec.v.ConfirmedBy = who.Node, who.Node
	default:
		rec.disputed, rec.rival = true, nil
		s.counters.Disputed++
		refuse(v.Key, "three nodes' verdicts differ (node "+rec.v.Node+"'s "+rec.v.Scan.Verdict+", this one's "+v.Scan.Verdict+"): every node scans this image itself")
	}
}

// resize counts rec's verdicts, its rival's too, in the store's bytes.
func (s *Verdicts) resize(rec *record) {
	s.used -= rec.size
	rec.size = sizeOf(rec.v)
	if rec.rival != nil {
		rec.size += sizeOf(*rec.rival)
	}
	s.used += rec.size
}

// agree says whether two scans of the same content with the same DB and
// policy reached the same verdict: the same word, the same end of life,
// and, for vulnerable, a finding in common (a scanner keeps only its
// first findings, in its own order).
func agree(a, b workerresult.Scan) bool {
	if a.Verdict != b.Verdict || a.EndOfLife != b.EndOfLife {
		return false
	}
	if a.Verdict != "vulnerable" {
		return true
	}
	for _, f := range a.Findings {
		for _, g := range b.Findings {
			if f.ID == g.ID {
				return true
			}
		}
	}
	return false
}

// evict makes room for need bytes by dropping settled verdicts, least
// recently used first. Called with s.mu held.
func (s *Verdicts) evict(need int64) {
	for s.used+need > s.budget && s.settled.Len() > 0 {
		rec := s.settled.Back().Value.(*record)
		s.forget(rec)
		s.counters.Evicted++
	}
}

// forget drops a stored verdict. Called with s.mu held.
func (s *Verdicts) forget(rec *record) {
	if rec.settledAt != nil {
		s.settled.Remove(rec.settledAt)
	}
	delete(s.byKey, rec.v.Key)
	s.used -= rec.size
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
			s.lapse(k, c)
			expired = true
		}
	}
	if expired {
		s.notify()
	}
}

// EndRuns closes the runs Live no longer names: their claims go, their
// unconfirmed or disputed verdicts are forgotten, and their confirmed ones
// serve later runs (evictable). Settled verdicts of a DB or policy that
// neither a live run nor an ending one asked about are dropped then: the
// DB moved on.
func (s *Verdicts) EndRuns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endRuns()
}

// endRuns is EndRuns with s.mu held.
func (s *Verdicts) endRuns() {
	if s.live == nil {
		return
	}
	var ended []string
	for job := range s.runs {
		if !s.live(job) {
			ended = append(ended, job)
		}
	}
	if len(ended) == 0 {
		return
	}
	gone, asked := map[string]bool{}, map[partition]bool{}
	for _, r := range s.runs {
		for _, u := range r.pods {
			for p := range u.partitions {
				asked[p] = true
			}
		}
	}
	for _, job := range ended {
		gone[job] = true
		delete(s.runs, job)
	}
	for k, c := range s.claims {
		if gone[c.job] {
			delete(s.claims, k)
		}
	}
	var settling []*record
	for _, rec := range s.byKey {
		switch {
		case !asked[partitionOf(rec.v.Key)]:
			s.forget(rec)
			s.counters.Forgotten++
		case !gone[rec.job] || rec.settledAt != nil:
		case rec.confirmedBy == "" || rec.disputed:
			s.forget(rec)
			s.counters.Forgotten++
		default:
			settling = append(settling, rec)
		}
	}
	// Oldest verdict first, so that it is the first the budget evicts; the
	// map's order would make eviction a coin toss.
	slices.SortFunc(settling, func(a, b *record) int {
		if c := a.v.At.Compare(b.v.At); c != 0 {
			return c
		}
		return cmp.Compare(a.v.Key.String(), b.v.Key.String())
	})
	for _, rec := range settling {
		rec.settledAt = s.settled.PushFront(rec)
	}
	s.notify()
}

// Stats is what the store holds now and did since it started.
type Stats struct {
	Counters
	Verdicts, Claims, Runs int
	Bytes                  int64
}

// Stats reads the store's counters and sizes.
func (s *Verdicts) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Counters: s.counters, Verdicts: len(s.byKey), Claims: len(s.claims), Runs: len(s.runs), Bytes: s.used}
}

// sizeOf estimates a verdict's memory: its strings and a fixed overhead
// for the map, the record and the structs.
func sizeOf(v scanshare.Verdict) int64 {
	n := 320 + len(v.Key.Digest) + len(v.Key.Platform) + len(v.Key.DB) + len(v.Key.Policy) +
		len(v.Node) + len(v.Pod) + len(v.ConfirmedBy) + len(v.Scan.Verdict)
	for _, f := range v.Scan.Findings {
		n += 64 + len(f.ID) + len(f.Severity) + len(f.Package) + len(f.FixedVersion)
	}
	return int64(n)
}
