package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

var c0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// TestSucceededNodes: the reached nodes, less the failed and the waiting.
func TestSucceededNodes(t *testing.T) {
	targets := []string{"a", "b", "c", "d", "e"}
	cases := map[string]struct {
		status eraserv1.ImageJobStatus
		want   []string
	}{
		"all":                  {status: eraserv1.ImageJobStatus{Started: 5}, want: targets},
		"failed by reason":     {status: eraserv1.ImageJobStatus{Started: 5, FailedIndexes: map[string]string{"PodFailed": "0", "NodeDeleted": "3-4"}}, want: []string{"b", "c"}},
		"waiting never ran":    {status: eraserv1.ImageJobStatus{Started: 5, WaitingIndexes: "1,2"}, want: []string{"a", "d", "e"}},
		"not reached (budget)": {status: eraserv1.ImageJobStatus{Started: 2}, want: []string{"a", "b"}},
		"none":                 {status: eraserv1.ImageJobStatus{}},
	}
	got, want := map[string][]string{}, map[string][]string{}
	for name, tc := range cases {
		got[name], want[name] = succeededNodes(targets, tc.status), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("succeeded (-want +got):\n%s", diff)
	}
}

// TestDue: a node is due when it missed the last scheduled run, had no
// catch-up within the interval and is at least minAge old; nothing is due
// before the record began.
func TestDue(t *testing.T) {
	run := c0.Add(-time.Hour)
	known := Coverage{Since: c0.Add(-48 * time.Hour), LastRun: run,
		Cleaned: map[string]time.Time{"ok": run, "old": run.Add(-24 * time.Hour), "caught": run.Add(30 * time.Minute)},
		Tried:   map[string]time.Time{"tried": c0.Add(-time.Hour), "long-ago": c0.Add(-7 * time.Hour)}}
	nodes := func(names ...string) []EligibleNode {
		var out []EligibleNode
		for _, n := range names {
			out = append(out, EligibleNode{Name: n})
		}
		return out
	}
	joined := func(name string, ago time.Duration) EligibleNode {
		return EligibleNode{Name: name, Created: c0.Add(-ago)}
	}
	const minAge = 10 * time.Minute
	type result struct {
		Nodes []string
		Ripe  time.Duration
	}
	cases := map[string]struct {
		c        Coverage
		eligible []EligibleNode
		want     result
	}{
		"cleaned in the last run":         {c: known, eligible: nodes("ok", "caught")},
		"missed it, never cleaned, tried": {c: known, eligible: nodes("old", "new", "tried", "long-ago"), want: result{Nodes: []string{"long-ago", "new", "old"}}},
		"no record yet (an upgrade)":      {c: Coverage{}, eligible: nodes("old", "new")},
		"no scheduled run yet":            {c: Coverage{Since: c0, Cleaned: map[string]time.Time{}}, eligible: nodes("new")},
		"joined a minute ago: not yet, looked at when old enough": {
			c: known, eligible: []EligibleNode{joined("young", time.Minute)}, want: result{Ripe: 9 * time.Minute}},
		"the youngest waits, the first to ripen is told": {
			c: known, eligible: []EligibleNode{joined("young", time.Minute), joined("younger", 30*time.Second), joined("of-age", minAge), joined("old", time.Hour)},
			want: result{Nodes: []string{"of-age", "old"}, Ripe: 9 * time.Minute}},
		"young but cleaned or tried: not waited for": {
			c: known, eligible: []EligibleNode{joined("caught", time.Minute), joined("tried", time.Minute)}},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		var r result
		r.Nodes, r.Ripe = due(tc.c, tc.eligible, c0, 6*time.Hour, minAge)
		got[name], want[name] = r, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("due (-want +got):\n%s", diff)
	}
}

// TestCoverageRecord: a scheduled run moves LastRun, a catch-up does not;
// successes only move forward; the first record starts the record.
func TestCoverageRecord(t *testing.T) {
	first := Coverage{}.record(c0, false, []string{"a", "b"}, c0.Add(time.Hour))
	want := Coverage{Since: c0.Add(time.Hour), LastRun: c0, Cleaned: map[string]time.Time{"a": c0, "b": c0}, Tried: map[string]time.Time{}}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first record (-want +got):\n%s", diff)
	}
	catchUp := first.record(c0.Add(2*time.Hour), true, []string{"c"}, c0.Add(3*time.Hour))
	older := catchUp.record(c0.Add(-time.Hour), false, []string{"a"}, c0.Add(3*time.Hour))
	want = Coverage{Since: c0.Add(time.Hour), LastRun: c0,
		Cleaned: map[string]time.Time{"a": c0, "b": c0, "c": c0.Add(2 * time.Hour)}, Tried: map[string]time.Time{}}
	if diff := cmp.Diff(want, older); diff != "" {
		t.Errorf("after a catch-up and an older run (-want +got):\n%s", diff)
	}
	if len(first.Cleaned) != 2 {
		t.Errorf("record changed its receiver: %v", first.Cleaned)
	}
}

// TestInterval: repeatInterval, or the gap between cron times.
func TestInterval(t *testing.T) {
	cases := map[string]struct {
		s    config.Scheduling
		want time.Duration
	}{
		"repeat":       {s: config.Scheduling{RepeatInterval: 6 * time.Hour}, want: 6 * time.Hour},
		"cron hourly":  {s: config.Scheduling{Cron: "0 * * * *"}, want: time.Hour},
		"cron nightly": {s: config.Scheduling{Cron: "30 2 * * *"}, want: 24 * time.Hour},
	}
	got, want := map[string]time.Duration{}, map[string]time.Duration{}
	for name, tc := range cases {
		got[name], want[name] = interval(tc.s, c0), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("interval (-want +got):\n%s", diff)
	}
}

// TestTimesRoundTrip: the per-node record survives the state ConfigMap, and
// an unreadable one is an error, not an empty record taken for truth.
func TestTimesRoundTrip(t *testing.T) {
	in := map[string]time.Time{"a": c0, "b": c0.Add(time.Hour)}
	s, err := encodeTimes(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeTimes(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := decodeTimes(`{"a":"yesterday"}`); err == nil {
		t.Error("an unreadable record decoded")
	}
}

// TestCoverageRecordClearsTried: a success that covers the last scheduled
// run (in it, or in a catch-up after it) ends the node's retry record; a
// success older than the last scheduled run does not, nor does a failure.
func TestCoverageRecordClearsTried(t *testing.T) {
	run := c0.Add(-time.Hour)
	base := Coverage{Since: c0.Add(-48 * time.Hour), LastRun: run,
		Cleaned: map[string]time.Time{"a": run.Add(-24 * time.Hour), "b": run.Add(-24 * time.Hour)},
		Tried:   map[string]time.Time{"a": c0.Add(-30 * time.Minute), "b": c0.Add(-30 * time.Minute)}}
	cases := map[string]struct {
		run       time.Time
		catchUp   bool
		succeeded []string
		want      []string
	}{
		"catch-up succeeded on a":          {run: c0.Add(-30 * time.Minute), catchUp: true, succeeded: []string{"a"}, want: []string{"b"}},
		"next scheduled run on both":       {run: c0, succeeded: []string{"a", "b"}},
		"an older run's success":           {run: run.Add(-12 * time.Hour), succeeded: []string{"a", "b"}, want: []string{"a", "b"}},
		"catch-up failed on both":          {run: c0.Add(-30 * time.Minute), catchUp: true, want: []string{"a", "b"}},
		"success of a node never tried":    {run: c0, succeeded: []string{"c"}, want: []string{"a", "b"}},
		"catch-up on a, scheduled on b":    {run: c0.Add(-30 * time.Minute), catchUp: true, succeeded: []string{"a", "b"}},
		"scheduled success of the tried b": {run: run, succeeded: []string{"b"}, want: []string{"a"}},
	}
	got, want := map[string][]string{}, map[string][]string{}
	for name, tc := range cases {
		out := base.record(tc.run, tc.catchUp, tc.succeeded, c0)
		got[name], want[name] = nodeNames(Coverage{Tried: out.Tried}), tc.want
		if len(base.Tried) != 2 {
			t.Fatalf("%s: record changed its receiver's Tried: %v", name, base.Tried)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("tried after the record (-want +got):\n%s", diff)
	}
}
