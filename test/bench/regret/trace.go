// Package regret replays seeded traces of a node fleet over 30 days through
// three image garbage collectors, as the code each runs on a node: the
// kubelet's own (k8s.io/kubernetes/pkg/kubelet/images), this project's
// default scheduled run, and its regret-aware policy (the remover's Run with
// the retention settings that turn it on). It counts what each removal cost
// afterwards: bytes pulled again, pod starts that waited on such a pull, and
// starts that failed because the registry had dropped the image in between.
// docs/dev/benchmarks.md describes the traces and the figures.
package regret

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

const (
	MiB = uint64(1) << 20
	GiB = uint64(1) << 30
)

// Start is the trace's first instant (a Monday); every trace lasts Days.
var Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// Days is the length of every trace.
const Days = 30

// RegistryRetention is how long the trace's registry keeps a tag of a
// repository with a retention rule: a pull of an older one fails.
const RegistryRetention = 14 * 24 * time.Hour

// Image is one image version of the trace.
type Image struct {
	// Repo is the repository ("registry.example/web/shop"), Tag its tag.
	Repo, Tag string
	ID        string
	Size      uint64
	// Pushed is when the registry got it; Permanent: the registry never
	// drops it (a third-party base image), else it drops it
	// RegistryRetention after Pushed.
	Pushed    time.Time
	Permanent bool
	ref, dig  string
}

// Ref is the image's tag reference.
func (i *Image) Ref() string { return i.ref }

// Digest is its repository digest reference.
func (i *Image) Digest() string { return i.dig }

// Available says whether the registry serves the image at t.
func (i *Image) Available(t time.Time) bool {
	return i.Permanent || t.Before(i.Pushed.Add(RegistryRetention))
}

// Kind is what an event does.
type Kind int

const (
	// PodStart starts a pod's container on a node: its image (and the
	// image it mounts as a volume, if any) must be there or be pulled.
	PodStart Kind = iota
	// PodExit ends its container; the exited container stays listed
	// (and keeps its image in use) until PodDelete.
	PodExit
	// PodDelete removes the pod and its containers from the node.
	PodDelete
	// Template sets what a workload template (Deployment, CronJob)
	// references: the cluster's references the manager hands the workers.
	// Image -1 deletes the template.
	Template
)

// Event is one step of a trace.
type Event struct {
	At   time.Time
	Kind Kind
	// Pod is the pod's name; Node its node (PodStart).
	Pod  string
	Node int
	// Image is the container's image (PodStart, Template); Mount the
	// image it mounts as an image volume, -1 for none.
	Image, Mount int
	// Owner names the template (Template).
	Owner string
	seq   int
}

// Trace is a profile's events, sorted, over its fleet.
type Trace struct {
	Name        string
	Description string
	Seed        uint64
	Nodes       int
	Capacity    uint64
	// Base is what the image filesystem holds besides images (writable
	// layers, logs).
	Base   uint64
	Images []*Image
	// Preload are the images each node holds at the start, pulled before
	// the trace and unused since (a node that has run for months).
	Preload [][]Preloaded
	Events  []Event
	// Params are the profile's parameters, for the results and the docs.
	Params map[string]any
	byID   map[string]int
}

// index finds an image by its ID.
func (t *Trace) index(id string) (int, bool) {
	i, ok := t.byID[id]
	return i, ok
}

// Preloaded is an image on a node when the trace starts.
type Preloaded struct {
	Image   int
	Arrived time.Time
}

// builder accumulates a trace.
type builder struct {
	t   *Trace
	rng *rand.Rand
	seq int
	pod int
}

func newBuilder(name string, seed uint64, nodes int, capacity, base uint64) *builder {
	return &builder{
		t:   &Trace{Name: name, Seed: seed, Nodes: nodes, Capacity: capacity, Base: base, Preload: make([][]Preloaded, nodes), Params: map[string]any{}},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// image adds an image version.
func (b *builder) image(repo, tag string, size uint64, pushed time.Time, permanent bool) int {
	sum := sha256.Sum256([]byte(b.t.Name + "|" + repo + ":" + tag))
	id := "sha256:" + hex.EncodeToString(sum[:])
	b.t.Images = append(b.t.Images, &Image{Repo: repo, Tag: tag, ID: id, Size: size, Pushed: pushed, Permanent: permanent, ref: repo + ":" + tag, dig: repo + "@" + id})
	return len(b.t.Images) - 1
}

// logUniform draws a size between lo and hi, log-uniformly.
func (b *builder) logUniform(lo, hi uint64) uint64 {
	l, h := math.Log(float64(lo)), math.Log(float64(hi))
	return uint64(math.Exp(l + b.rng.Float64()*(h-l)))
}

// between draws a duration in [lo, hi).
func (b *builder) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(b.rng.Int64N(int64(hi-lo)))
}

func (b *builder) add(e Event) {
	e.seq = b.seq
	b.seq++
	b.t.Events = append(b.t.Events, e)
}

// run starts a pod at at on node, running for run, kept (exited) for keep
// before it is deleted; run 0 never ends within the trace unless stopped.
func (b *builder) run(at time.Time, node, image, mount int, run, keep time.Duration) string {
	b.pod++
	name := fmt.Sprintf("pod-%d", b.pod)
	b.add(Event{At: at, Kind: PodStart, Pod: name, Node: node, Image: image, Mount: mount})
	if run > 0 {
		b.add(Event{At: at.Add(run), Kind: PodExit, Pod: name})
		b.add(Event{At: at.Add(run + keep), Kind: PodDelete, Pod: name})
	}
	return name
}

func (b *builder) stop(at time.Time, pod string) {
	b.add(Event{At: at, Kind: PodDelete, Pod: pod})
}

func (b *builder) template(at time.Time, owner string, image int) {
	b.add(Event{At: at, Kind: Template, Owner: owner, Image: image, Mount: -1})
}

// done sorts the events and drops those after the trace's end.
func (b *builder) done() *Trace {
	end := Start.Add(Days * 24 * time.Hour)
	ev := b.t.Events[:0]
	for _, e := range b.t.Events {
		if e.At.Before(end) {
			ev = append(ev, e)
		}
	}
	sort.SliceStable(ev, func(i, j int) bool {
		if !ev[i].At.Equal(ev[j].At) {
			return ev[i].At.Before(ev[j].At)
		}
		return ev[i].seq < ev[j].seq
	})
	b.t.Events = ev
	b.t.byID = make(map[string]int, len(b.t.Images))
	for i, im := range b.t.Images {
		b.t.byID[im.ID] = i
	}
	return b.t
}

// preload fills each node with old images of the given repositories until
// frac of its capacity is used: versions pulled 15 to 60 days before the
// trace, never used since.
func (b *builder) preload(frac float64, repo func(k int) string, lo, hi uint64) {
	for n := range b.t.Nodes {
		used := b.t.Base
		for _, p := range b.t.Preload[n] {
			used += b.t.Images[p.Image].Size
		}
		for k := 0; float64(used) < frac*float64(b.t.Capacity); k++ {
			arrived := Start.Add(-b.between(15*24*time.Hour, 60*24*time.Hour))
			img := b.image(repo(k), fmt.Sprintf("old-n%d-%d", n, k), b.logUniform(lo, hi), arrived.Add(-time.Hour), false)
			b.t.Preload[n] = append(b.t.Preload[n], Preloaded{Image: img, Arrived: arrived})
			used += b.t.Images[img].Size
		}
	}
}

func day(d int) time.Time { return Start.Add(time.Duration(d) * 24 * time.Hour) }

func weekday(d int) bool { wd := day(d).Weekday(); return wd != time.Saturday && wd != time.Sunday }

// Profiles are the traces the benchmark replays.
func Profiles() []*Trace {
	return []*Trace{WebFleet(1), CIRunners(2), TagBumps(3), CronJobs(4)}
}

// WebFleet: services released once a working day, some rolled back within
// hours; a few scaled to zero every night, one of them on an image older
// than the registry keeps; a sidecar in every pod.
func WebFleet(seed uint64) *Trace {
	const (
		nodes     = 4
		services  = 14
		replicas  = 3
		nightly   = 3 // services 0..2 scale to zero from 20:00 to 07:30
		pRelease  = 0.8
		pRollback = 0.12
	)
	b := newBuilder("web", seed, nodes, 100*GiB, 12*GiB)
	b.t.Description = "web fleet: daily releases and rollbacks, nightly scale-to-zero"
	b.t.Params = map[string]any{"nodes": nodes, "capacityGiB": 100, "baseGiB": 12, "services": services, "replicas": replicas,
		"releaseChancePerWorkday": pRelease, "releaseHours": "09-17", "rollbackChance": pRollback, "rollbackAfter": "20m-6h",
		"nightlyScaleToZero": nightly + 1, "legacyImagePushed": "40 days before the start (gone from the registry)",
		"imageSizes": "200 MiB-1.2 GiB", "sidecar": "150 MiB, in every pod", "preload": "45% of the disk in old versions"}
	sidecar := b.image("registry.example/mesh/proxy", "1.24", 150*MiB, Start.Add(-90*24*time.Hour), true)
	type svc struct {
		repo     string
		size     uint64
		versions []int
		current  int
		pods     []string
		nodes    []int
		scaled   bool
	}
	var svcs []*svc
	for s := range services {
		v := &svc{repo: fmt.Sprintf("registry.example/web/svc-%02d", s), size: b.logUniform(200*MiB, 1200*MiB)}
		v.versions = append(v.versions, b.image(v.repo, "v0", v.size, Start.Add(-12*time.Hour), false))
		svcs = append(svcs, v)
	}
	// The legacy service: never released in the trace, its image past the
	// registry's retention, its two pods bound to nodes 0 and 1 (local
	// volumes), scaled to zero every night.
	legacy := &svc{repo: "registry.example/web/legacy-billing", size: 700 * MiB}
	legacy.versions = []int{b.image(legacy.repo, "v7", legacy.size, Start.Add(-40*24*time.Hour), false)}
	for _, n := range []int{0, 1} {
		b.t.Preload[n] = append(b.t.Preload[n], Preloaded{Image: legacy.versions[0], Arrived: Start.Add(-40 * 24 * time.Hour)})
	}
	b.preload(0.45, func(k int) string { return svcs[k%services].repo }, 200*MiB, 1200*MiB)

	place := func(at time.Time, v *svc, image int, fixed []int) {
		for _, p := range v.pods {
			b.stop(at.Add(b.between(time.Minute, 10*time.Minute)), p)
		}
		v.pods, v.nodes = nil, nil
		for r := range replicas {
			n := b.rng.IntN(nodes)
			if fixed != nil {
				if r >= len(fixed) {
					break
				}
				n = fixed[r]
			}
			v.pods = append(v.pods, b.run(at, n, image, -1, 0, 0))
			v.pods = append(v.pods, b.run(at, n, sidecar, -1, 0, 0))
			v.nodes = append(v.nodes, n)
		}
		v.current = image
	}
	for _, v := range svcs {
		b.template(Start, "Deployment web/"+v.repo[len("registry.example/web/"):], v.versions[0])
		place(Start, v, v.versions[0], nil)
	}
	b.template(Start, "Deployment web/legacy-billing", legacy.versions[0])
	place(Start.Add(7*time.Hour+30*time.Minute), legacy, legacy.versions[0], []int{0, 1})
	all := append(svcs[:nightly:nightly], legacy)
	for d := range Days {
		for i, v := range svcs {
			if !weekday(d) || b.rng.Float64() >= pRelease {
				continue
			}
			at := day(d).Add(b.between(9*time.Hour, 17*time.Hour))
			img := b.image(v.repo, fmt.Sprintf("v%d", len(v.versions)), v.size+uint64(b.rng.Int64N(int64(v.size/20))), at.Add(-10*time.Minute), false)
			v.versions = append(v.versions, img)
			owner := "Deployment web/" + v.repo[len("registry.example/web/"):]
			b.template(at, owner, img)
			if i < nightly && (at.Hour() >= 20 || at.Hour() < 8) {
				continue
			}
			place(at, v, img, nil)
			if b.rng.Float64() < pRollback {
				back := at.Add(b.between(20*time.Minute, 6*time.Hour))
				prev := v.versions[len(v.versions)-2]
				b.template(back, owner, prev)
				place(back, v, prev, nil)
				// The fix follows the next working day as a new version.
			}
		}
		// Nightly scale to zero and back, on the image each has then.
		for i, v := range all {
			down := day(d).Add(20 * time.Hour)
			up := day(d + 1).Add(7*time.Hour + 30*time.Minute)
			for _, p := range v.pods {
				b.stop(down, p)
			}
			v.pods = nil
			img := v.current
			var fixed []int
			if v == legacy {
				fixed = []int{0, 1}
			}
			_ = i
			place(up, v, img, fixed)
		}
	}
	return b.done()
}

// CIRunners: build jobs on runner nodes, half of them on an image built
// for that commit (used once, sometimes retried), half on shared toolchain
// images of skewed popularity, a third of which get a new tag every Monday.
func CIRunners(seed uint64) *Trace {
	const (
		nodes     = 3
		tools     = 40
		pOneOff   = 0.5
		pRetry    = 0.1
		busyRate  = 12.0 // jobs per node-hour, workdays 07-20
		quietRate = 2.0
	)
	b := newBuilder("ci", seed, nodes, 200*GiB, 20*GiB)
	b.t.Description = "CI runners: many one-off images, shared toolchains"
	b.t.Params = map[string]any{"nodes": nodes, "capacityGiB": 200, "baseGiB": 20, "toolchainImages": tools,
		"toolchainPopularity": "Zipf s=1.1", "toolchainSizes": "300 MiB-4 GiB, never dropped by the registry, a third re-tagged every Monday",
		"oneOffShare": pOneOff, "oneOffSizes": "500 MiB-3 GiB, built per commit", "retryChance": pRetry, "retryWithin": "2h",
		"jobsPerNodeHour": "12 on workdays 07-20, 2 otherwise", "jobLength": "3-25 min, pod deleted when done", "preload": "none"}
	type tool struct {
		repo    string
		size    uint64
		current int
		n       int
	}
	var ts []*tool
	for k := range tools {
		t := &tool{repo: fmt.Sprintf("registry.example/ci/toolchain-%02d", k), size: b.logUniform(300*MiB, 4*GiB)}
		t.current = b.image(t.repo, "w0", t.size, Start.Add(-5*24*time.Hour), true)
		ts = append(ts, t)
	}
	zipf := rand.NewZipf(b.rng, 1.1, 1, tools-1)
	oneOff := 0
	for d := range Days {
		if day(d).Weekday() == time.Monday && d > 0 {
			for k, t := range ts {
				if k%3 == 0 {
					t.n++
					t.current = b.image(t.repo, fmt.Sprintf("w%d", t.n), t.size+uint64(b.rng.Int64N(int64(t.size/10))), day(d).Add(2*time.Hour), true)
				}
			}
		}
		for n := range nodes {
			for h := range 24 {
				rate := quietRate
				if weekday(d) && h >= 7 && h < 20 {
					rate = busyRate
				}
				at := day(d).Add(time.Duration(h) * time.Hour)
				end := at.Add(time.Hour)
				for {
					at = at.Add(time.Duration(b.rng.ExpFloat64() / rate * float64(time.Hour)))
					if !at.Before(end) {
						break
					}
					var img int
					if b.rng.Float64() < pOneOff {
						oneOff++
						img = b.image(fmt.Sprintf("registry.example/ci/app-%d", oneOff%25), fmt.Sprintf("sha-%06d", oneOff), b.logUniform(500*MiB, 3*GiB), at.Add(-b.between(2*time.Minute, 15*time.Minute)), false)
						if b.rng.Float64() < pRetry {
							b.run(at.Add(b.between(30*time.Minute, 2*time.Hour)), b.rng.IntN(nodes), img, -1, b.between(3*time.Minute, 25*time.Minute), 0)
						}
					} else {
						img = ts[zipf.Uint64()].current
					}
					b.run(at, n, img, -1, b.between(3*time.Minute, 25*time.Minute), 0)
				}
			}
		}
	}
	return b.done()
}

// TagBumps: the field case of a cluster that filled 399 of 495 GiB with
// 2,343 images: every service gets a new tag every day, a few roll back;
// weekly jobs run on images the registry may have dropped.
func TagBumps(seed uint64) *Trace {
	const (
		nodes     = 2
		repos     = 80 // per node
		weekly    = 10 // per node
		pRollback = 0.03
	)
	b := newBuilder("tagbump", seed, nodes, 495*GiB, 10*GiB)
	b.t.Description = "tag bumps daily: the 399 of 495 GiB, 2,343 images field case"
	b.t.Params = map[string]any{"nodes": nodes, "capacityGiB": 495, "baseGiB": 10, "servicesPerNode": repos,
		"bump": "one new tag per service per day, at a random hour", "imageSizes": "40-600 MiB (170 MiB mean, as in the field case)",
		"rollbackChance": pRollback, "weeklyJobsPerNode": weekly, "weeklyJobs": "Sundays 02:00, half on images pushed 30 days before the start (gone from the registry)",
		"preload": "superseded tags up to 70% of the disk (about 2,000 images, as in the field case)"}
	for n := range nodes {
		type svc struct {
			repo string
			size uint64
			cur  []int
			pod  string
		}
		var ss []*svc
		for k := range repos {
			s := &svc{repo: fmt.Sprintf("registry.example/tb/n%d-svc-%02d", n, k), size: b.logUniform(40*MiB, 600*MiB)}
			img := b.image(s.repo, "d0", s.size, Start.Add(-6*time.Hour), false)
			s.cur = []int{img}
			b.template(Start, fmt.Sprintf("Deployment tb/n%d-svc-%02d", n, k), img)
			s.pod = b.run(Start, n, img, -1, 0, 0)
			ss = append(ss, s)
		}
		for k := range weekly {
			pushed := Start.Add(-30 * 24 * time.Hour)
			permanent := k%2 == 1
			img := b.image(fmt.Sprintf("registry.example/tb/n%d-weekly-%d", n, k), "r1", b.logUniform(200*MiB, 1500*MiB), pushed, permanent)
			owner := fmt.Sprintf("CronJob tb/n%d-weekly-%d", n, k)
			b.template(Start, owner, img)
			for d := range Days {
				if day(d).Weekday() == time.Sunday {
					b.run(day(d).Add(2*time.Hour+time.Duration(k)*time.Minute), n, img, -1, b.between(10*time.Minute, 40*time.Minute), 10*time.Minute)
				}
			}
		}
		for d := 1; d < Days; d++ {
			for k, s := range ss {
				at := day(d).Add(b.between(0, 24*time.Hour))
				img := b.image(s.repo, fmt.Sprintf("d%d", d), s.size+uint64(b.rng.Int64N(int64(s.size/20)+1)), at.Add(-15*time.Minute), false)
				s.cur = append(s.cur, img)
				owner := fmt.Sprintf("Deployment tb/n%d-svc-%02d", n, k)
				b.template(at, owner, img)
				b.stop(at.Add(2*time.Minute), s.pod)
				s.pod = b.run(at, n, img, -1, 0, 0)
				if b.rng.Float64() < pRollback && len(s.cur) > 1 {
					back := at.Add(b.between(30*time.Minute, 4*time.Hour))
					prev := s.cur[len(s.cur)-2]
					b.template(back, owner, prev)
					b.stop(back.Add(2*time.Minute), s.pod)
					s.pod = b.run(back, n, prev, -1, 0, 0)
				}
			}
		}
	}
	b.preload(0.70, func(k int) string { return fmt.Sprintf("registry.example/tb/old-svc-%02d", k%repos) }, 40*MiB, 600*MiB)
	return b.done()
}

// CronJobs: hourly and daily CronJobs whose pods land on any node and are
// kept (exited) for three runs, beside preview environments that churn the
// disk; half the CronJobs run on an image the registry has dropped.
func CronJobs(seed uint64) *Trace {
	const (
		nodes   = 3
		hourly  = 12
		daily   = 10
		preview = 1.5 // new preview images per node-hour
	)
	b := newBuilder("cron", seed, nodes, 100*GiB, 15*GiB)
	b.t.Description = "CronJobs returning hourly and daily, beside preview environments"
	b.t.Params = map[string]any{"nodes": nodes, "capacityGiB": 100, "baseGiB": 15, "hourlyCronJobs": hourly, "dailyCronJobs": daily,
		"cronImageSizes": "100-800 MiB hourly, 300 MiB-2 GiB daily", "cronJobImages": "even ones rebuilt every Monday (the template follows), odd ones pushed 20-40 days before the start (gone from the registry)",
		"jobPods": "run 2-15 min, kept exited for three periods (history limit 3)", "previewImagesPerNodeHour": preview,
		"previewSizes": "400 MiB-1.5 GiB, running 2-8 h", "preload": "40% of the disk in old previews"}
	type cron struct {
		repo   string
		size   uint64
		img    int
		period time.Duration
		minute time.Duration
		owner  string
		n      int
	}
	var cs []*cron
	for k := range hourly + daily {
		c := &cron{period: time.Hour, size: b.logUniform(100*MiB, 800*MiB)}
		kind := "hourly"
		if k >= hourly {
			c.period, kind, c.size = 24*time.Hour, "daily", b.logUniform(300*MiB, 2*GiB)
		}
		c.repo = fmt.Sprintf("registry.example/jobs/%s-%02d", kind, k)
		c.owner = fmt.Sprintf("CronJob jobs/%s-%02d", kind, k)
		pushed := Start.Add(-2 * 24 * time.Hour)
		if k%2 == 1 {
			pushed = Start.Add(-b.between(20*24*time.Hour, 40*24*time.Hour))
		}
		c.img = b.image(c.repo, "r0", c.size, pushed, false)
		c.minute = b.between(0, 55*time.Minute)
		if c.period > time.Hour {
			c.minute += time.Duration(b.rng.IntN(24)) * time.Hour
		}
		b.template(Start, c.owner, c.img)
		cs = append(cs, c)
	}
	for d := range Days {
		for k, c := range cs {
			if k%2 == 0 && d > 0 && day(d).Weekday() == time.Monday {
				c.n++
				c.img = b.image(c.repo, fmt.Sprintf("r%d", c.n), c.size, day(d).Add(time.Hour), false)
				b.template(day(d).Add(time.Hour), c.owner, c.img)
			}
			for at := day(d).Add(c.minute % c.period); at.Before(day(d + 1)); at = at.Add(c.period) {
				b.run(at, b.rng.IntN(nodes), c.img, -1, b.between(2*time.Minute, 15*time.Minute), 3*c.period)
			}
		}
		for n := range nodes {
			at := day(d)
			for {
				at = at.Add(time.Duration(b.rng.ExpFloat64() / preview * float64(time.Hour)))
				if !at.Before(day(d + 1)) {
					break
				}
				img := b.image(fmt.Sprintf("registry.example/preview/pr-%d", b.rng.IntN(400)), fmt.Sprintf("c%d", len(b.t.Images)), b.logUniform(400*MiB, 1536*MiB), at.Add(-10*time.Minute), false)
				b.run(at, n, img, -1, b.between(2*time.Hour, 8*time.Hour), 0)
			}
		}
	}
	b.preload(0.40, func(k int) string { return fmt.Sprintf("registry.example/preview/pr-%d", 1000+k) }, 400*MiB, 1536*MiB)
	return b.done()
}
