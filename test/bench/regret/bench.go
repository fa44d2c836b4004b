package regret

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// Policy is one way of collecting a node's images. Every node keeps the
// kubelet's own collector at its defaults, as every real node does; an
// Eraser policy runs beside it on its schedule.
type Policy struct {
	Name        string
	Description string
	// Eraser: scheduled runs with these settings every Every, first at
	// First after the start; nil: the kubelet alone.
	Eraser *retention.Settings
	Every  time.Duration
	First  time.Duration
}

// Policies are the collectors compared.
func Policies() []Policy {
	def := retention.Settings{MinAge: workerdefaults.MinAge}
	thresholds := def
	thresholds.HighThresholdPercent, thresholds.LowThresholdPercent = HighThreshold, LowThreshold
	aware := RegretAware()
	return []Policy{
		{Name: "kubelet", Description: "the kubelet's image GC alone (85/80, minAge 2m, no maxAge)"},
		{Name: "eraser-default", Description: "kubelet + Eraser's default scheduled run: daily, no scanner, every unused unreferenced image older than 10m", Eraser: &def, Every: 24 * time.Hour, First: time.Hour},
		{Name: "eraser-85/80", Description: "kubelet + Eraser's daily scheduled run with the thresholds at the kubelet's 85/80", Eraser: &thresholds, Every: 24 * time.Hour, First: time.Hour},
		{Name: "eraser-regret", Description: RegretAwareDescription(), Eraser: &aware, Every: RegretEvery, First: 30 * time.Minute},
	}
}

// Result is one policy's replay of one trace.
type Result struct {
	Profile string   `json:"profile"`
	Policy  string   `json:"policy"`
	Metrics *Metrics `json:"metrics"`
	Wall    string   `json:"wall"`
	// GCCalls is how many times the kubelet's collector ran, over all
	// nodes; GCSkipped the periods left out as changing nothing.
	GCCalls   int `json:"kubeletGCCalls"`
	GCSkipped int `json:"kubeletGCPeriodsSkipped"`
}

// Replay runs a trace under a policy. scale is how much faster than the
// trace's time the kubelet's wall clock runs.
func Replay(ctx context.Context, tr *Trace, pol Policy, scale float64, dir string) (*Result, error) {
	start := time.Now()
	// The kubelet's collector logs each removal; the figures say it all.
	ctx = klog.NewContext(ctx, logr.Discard())
	m := &Metrics{capacity: tr.Capacity}
	nodes := make([]*Node, tr.Nodes)
	gcs := make([]*kubeletGC, tr.Nodes)
	ers := make([]*eraserNode, tr.Nodes)
	for i := range nodes {
		nodes[i] = newNode(i, tr, m)
		gc, err := newKubeletGC(nodes[i], scale)
		if err != nil {
			return nil, err
		}
		gcs[i] = gc
		if pol.Eraser != nil {
			if ers[i], err = newEraserNode(nodes[i], filepath.Join(dir, fmt.Sprintf("node-%d", i))); err != nil {
				return nil, err
			}
		}
	}
	templates := map[string]int{}
	podNode := map[string]int{}
	end := Start.Add(Days * 24 * time.Hour)
	next := Start.Add(pol.First)
	runEraser := func(until time.Time) error {
		for pol.Eraser != nil && !next.After(until) && next.Before(end) {
			for _, e := range ers {
				if err := e.run(ctx, next, *pol.Eraser, templates); err != nil {
					return fmt.Errorf("%s/%s: Eraser's run at %s on node %d: %w", tr.Name, pol.Name, next.Format(time.RFC3339), e.n.ID, err)
				}
			}
			next = next.Add(pol.Every)
		}
		return nil
	}
	res := &Result{Profile: tr.Name, Policy: pol.Name, Metrics: m}
	ev := tr.Events
	for t := Start; t.Before(end); t = t.Add(ImageGCPeriod) {
		for len(ev) > 0 && !ev[0].At.After(t) {
			e := ev[0]
			ev = ev[1:]
			if err := runEraser(e.At); err != nil {
				return nil, err
			}
			switch e.Kind {
			case PodStart:
				podNode[e.Pod] = e.Node
				nodes[e.Node].apply(e)
			case PodExit:
				if n, ok := podNode[e.Pod]; ok {
					nodes[n].apply(e)
				}
			case PodDelete:
				if n, ok := podNode[e.Pod]; ok {
					nodes[n].apply(e)
					delete(podNode, e.Pod)
				}
			case Template:
				if e.Image < 0 {
					delete(templates, e.Owner)
				} else {
					templates[e.Owner] = e.Image
				}
			}
		}
		if err := runEraser(t); err != nil {
			return nil, err
		}
		// The nodes whose pods change before the next period.
		soon := make([]bool, len(nodes))
		for _, e := range ev {
			if e.At.After(t.Add(ImageGCPeriod)) {
				break
			}
			switch e.Kind {
			case PodStart:
				soon[e.Node] = true
			case PodExit, PodDelete:
				if n, ok := podNode[e.Pod]; ok {
					soon[n] = true
				}
			}
		}
		for i, n := range nodes {
			if gcs[i].Needed(n, soon[i]) {
				gcs[i].collect(ctx, n, t)
			} else {
				gcs[i].Skipped++
			}
			n.tick()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if m.samples > 0 {
		m.MeanPercent = m.sumPercent / float64(m.samples)
	}
	for _, gc := range gcs {
		res.GCCalls += gc.Calls
		res.GCSkipped += gc.Skipped
	}
	res.Wall = time.Since(start).Round(time.Millisecond).String()
	return res, nil
}

// Run replays every profile under every policy, all at once (each replay
// paces its own kubelet clock), and returns the results in order.
func Run(ctx context.Context, profiles []*Trace, policies []Policy, scale float64, dir string) ([]*Result, error) {
	out := make([]*Result, len(profiles)*len(policies))
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for i, tr := range profiles {
		for j, pol := range policies {
			k := i*len(policies) + j
			wg.Go(func() {
				d := filepath.Join(dir, tr.Name, strings.ReplaceAll(pol.Name, "/", "-"))
				if err := os.MkdirAll(d, 0o755); err != nil {
					errs[k] = err
					return
				}
				out[k], errs[k] = Replay(ctx, tr, pol, scale, d)
				if errs[k] == nil {
					fmt.Fprintf(os.Stderr, "replayed %s under %s in %s\n", tr.Name, pol.Name, out[k].Wall)
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Verdict is the goal, judged per profile: at the same peak disk as the
// kubelet's collector (within PeakSlack percentage points), at most half
// its re-pulled bytes and no failed start.
type Verdict struct {
	Profile  string  `json:"profile"`
	Policy   string  `json:"policy"`
	Met      bool    `json:"met"`
	PeakOK   bool    `json:"peakNoHigher"`
	HalfOK   bool    `json:"atMostHalfRepulled"`
	FailOK   bool    `json:"noFailedStart"`
	Ratio    float64 `json:"repulledRatio"`
	Headline string  `json:"headline"`
}

// PeakSlack is how far above the kubelet's peak disk a policy may go and
// still count as "the same peak": one large image on a 100 GiB disk.
const PeakSlack = 1.0

// Judge applies the goal to a policy's result against the kubelet's.
func Judge(kubelet, r *Result) Verdict {
	k, m := kubelet.Metrics, r.Metrics
	v := Verdict{Profile: r.Profile, Policy: r.Policy}
	v.PeakOK = m.PeakPercent <= k.PeakPercent+PeakSlack
	v.HalfOK = 2*m.RepulledBytes <= k.RepulledBytes
	v.FailOK = m.FailedStarts == 0
	if k.RepulledBytes > 0 {
		v.Ratio = float64(m.RepulledBytes) / float64(k.RepulledBytes)
	}
	v.Met = v.PeakOK && v.HalfOK && v.FailOK
	var why []string
	if !v.PeakOK {
		why = append(why, fmt.Sprintf("peak %.1f%% above the kubelet's %.1f%%", m.PeakPercent, k.PeakPercent))
	}
	if !v.HalfOK {
		why = append(why, fmt.Sprintf("re-pulled %s, more than half the kubelet's %s", gib(m.RepulledBytes), gib(k.RepulledBytes)))
	}
	if !v.FailOK {
		why = append(why, fmt.Sprintf("%d failed start(s)", m.FailedStarts))
	}
	v.Headline = "met"
	if !v.Met {
		v.Headline = "NOT met: " + strings.Join(why, "; ")
	}
	return v
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/float64(GiB)) }

// Print writes the figures table and the goal's verdicts.
func Print(w io.Writer, results []*Result) []Verdict {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tpolicy\tpulled\tre-pulled\tre-pulls\tstarts waited\tfailed (dropped)\tfailed (never had)\tdisk full\tpeak disk\tmean disk\tfreed\tfreed by kubelet\truns\twall\t")
	for _, r := range results {
		m := r.Metrics
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f%%\t%.1f%%\t%s\t%s\t%d\t%s\t\n", r.Profile, r.Policy,
			gib(m.PulledBytes), gib(m.RepulledBytes), m.Repulls, m.WaitedStarts, m.FailedStarts, m.FailedNeverHad, m.DiskFull,
			m.PeakPercent, m.MeanPercent, gib(m.FreedBytes), gib(m.FreedKubeletBytes), m.EraserRuns, r.Wall)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nGoal: at the same peak disk as the kubelet's GC (within 1 point), at most half its re-pulled bytes, and no failed start.")
	var out []Verdict
	var kubelet *Result
	for _, r := range results {
		if r.Policy == "kubelet" {
			kubelet = r
			continue
		}
		if kubelet == nil || kubelet.Profile != r.Profile {
			continue
		}
		v := Judge(kubelet, r)
		out = append(out, v)
		fmt.Fprintf(w, "  %-8s %-15s %s\n", v.Profile, v.Policy, v.Headline)
	}
	return out
}
