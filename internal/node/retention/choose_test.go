package retention

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// cand builds a candidate that arrived age ago and was last used used ago
// (0: never).
func cand(i int, size uint64, age, used time.Duration) Candidate {
	c := Candidate{Index: i, Size: size, Arrived: now.Add(-age)}
	if used > 0 {
		c.LastUsed = now.Add(-used)
	}
	return c
}

func listed(c Candidate) Candidate     { c.Listed = true; return c }
func vulnerable(c Candidate) Candidate { c.Vulnerable = true; return c }

// outcome is a decision without its detail, for the tables.
type outcome struct {
	Index  int
	Policy Policy
	Kept   workerresult.Outcome
}

func outcomes(ds []Decision) []outcome {
	out := make([]outcome, len(ds))
	for i, d := range ds {
		out[i] = outcome{d.Index, d.Policy, d.Kept}
	}
	return out
}

func TestChoose(t *testing.T) {
	base := Settings{MinAge: 10 * time.Minute}
	disk := Settings{MinAge: 10 * time.Minute, HighThresholdPercent: 85, LowThresholdPercent: 80}
	cases := map[string]struct {
		in    Input
		cands []Candidate
		want  []outcome
	}{
		"listed images go whatever their age": {
			in:    Input{Now: now, Settings: base},
			cands: []Candidate{listed(cand(0, 1, time.Second, 0)), listed(cand(1, 1, 30*day, 0))},
			want:  []outcome{{0, Listed, ""}, {1, Listed, ""}},
		},
		// The minimum age is a keep rule, applied before the policies
		// (internal/node/protect): a young candidate is not theirs to keep.
		"sweep takes every candidate": {
			in:    Input{Now: now, Settings: base, Sweep: true},
			cands: []Candidate{cand(0, 1, 9*time.Minute, 0), cand(1, 1, 10*time.Minute, 0), listed(cand(2, 1, 0, 0))},
			want:  []outcome{{0, Unused, ""}, {1, Unused, ""}, {2, Listed, ""}},
		},
		"scanner run considers only what it handed over": {
			in:    Input{Now: now, Settings: base, Scheduled: true},
			cands: []Candidate{vulnerable(cand(0, 1, time.Hour, 0)), cand(1, 1, time.Hour, 0), vulnerable(cand(2, 1, time.Minute, 0))},
			want:  []outcome{{0, Vulnerable, ""}, {1, "", ""}, {2, Vulnerable, ""}},
		},
		"unused for: last use or arrival, whichever is later": {
			in: Input{Now: now, Settings: Settings{MinAge: time.Minute, UnusedFor: 30 * day}, Scheduled: true},
			cands: []Candidate{
				cand(0, 1, 40*day, 31*day), // used 31 days ago
				cand(1, 1, 40*day, 29*day), // used 29 days ago
				cand(2, 1, 29*day, 0),      // never used, arrived 29 days ago
				cand(3, 1, 31*day, 0),      // never used, arrived 31 days ago
				cand(4, 1, 30*time.Second, 0),
				vulnerable(cand(5, 1, day, time.Hour)),
			},
			want: []outcome{{0, UnusedFor, ""}, {1, "", workerresult.RecentlyUsed}, {2, "", workerresult.RecentlyUsed}, {3, UnusedFor, ""}, {4, "", workerresult.RecentlyUsed}, {5, Vulnerable, ""}},
		},
		"unused for is not applied outside scheduled runs": {
			in:    Input{Now: now, Settings: Settings{MinAge: time.Minute, UnusedFor: day}},
			cands: []Candidate{cand(0, 1, 40*day, 0)},
			want:  []outcome{{0, "", ""}},
		},
		"below the high threshold nothing goes": {
			in:    Input{Now: now, Settings: disk, Scheduled: true, Disk: &Disk{Capacity: 100, Available: 16}},
			cands: []Candidate{cand(0, 10, day, 0), cand(1, 10, day, 0)},
			want:  []outcome{{0, "", workerresult.NotNeeded}, {1, "", workerresult.NotNeeded}},
		},
		"at the high threshold, least recently used first until below the low one": {
			// 85% used: to fall below 80% at least 6 bytes must go.
			in: Input{Now: now, Settings: disk, Scheduled: true, Disk: &Disk{Capacity: 100, Available: 15}},
			cands: []Candidate{
				cand(0, 3, 5*day, time.Hour), // used an hour ago: last
				cand(1, 2, 9*day, 0),         // oldest arrival, never used: first
				cand(2, 3, 7*day, 6*day),     // second
				cand(3, 50, 5*time.Minute, 0),
				cand(4, 4, 3*day, 2*day), // third: 2+3+4 = 9 >= 6 ... stops after it? see below
			},
			// After 1 (2) and 2 (3): 80 used, not below 80: 4 goes too.
			want: []outcome{{1, DiskPressure, ""}, {2, DiskPressure, ""}, {4, DiskPressure, ""}, {0, "", workerresult.NotNeeded}, {3, "", workerresult.NotNeeded}},
		},
		"ties in last use: larger first": {
			in:    Input{Now: now, Settings: disk, Scheduled: true, Disk: &Disk{Capacity: 100, Available: 10}},
			cands: []Candidate{cand(0, 5, day, 0), cand(1, 20, day, 0), cand(2, 5, day, 0)},
			want:  []outcome{{1, DiskPressure, ""}, {0, "", workerresult.NotNeeded}, {2, "", workerresult.NotNeeded}},
		},
		"other policies' removals count toward the disk": {
			in: Input{Now: now, Settings: Settings{MinAge: time.Minute, UnusedFor: 30 * day, HighThresholdPercent: 85, LowThresholdPercent: 80},
				Scheduled: true, Disk: &Disk{Capacity: 100, Available: 10}},
			cands: []Candidate{cand(0, 11, 40*day, 0), cand(1, 5, 2*day, 0), cand(2, 5, day, 0)},
			// 90 used, 11 freed by age: 79 < 80, the disk policy takes nothing.
			want: []outcome{{0, UnusedFor, ""}, {1, "", workerresult.RecentlyUsed}, {2, "", workerresult.RecentlyUsed}},
		},
		"unmeasured disk removes nothing by it": {
			in:    Input{Now: now, Settings: disk, Scheduled: true},
			cands: []Candidate{cand(0, 1, day, 0)},
			want:  []outcome{{0, "", workerresult.NotNeeded}},
		},
		"a run with no policy that considers a candidate leaves it undecided": {
			in:    Input{Now: now, Settings: base},
			cands: []Candidate{cand(0, 1, day, 0)},
			want:  []outcome{{0, "", ""}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Choose(tc.in, tc.cands)
			if diff := cmp.Diff(tc.want, outcomes(got)); diff != "" {
				t.Errorf("Choose (-want +got):\n%s", diff)
			}
			for _, d := range got {
				if d.Policy != "" && d.Kept != "" {
					t.Errorf("decision %d both chosen and kept: %+v", d.Index, d)
				}
				if d.Kept != "" && d.Detail == "" {
					t.Errorf("decision %d kept without a detail: %+v", d.Index, d)
				}
			}
		})
	}
}

func TestChooseDetails(t *testing.T) {
	in := Input{Now: now, Settings: Settings{MinAge: 10 * time.Minute, UnusedFor: 30 * day, HighThresholdPercent: 85, LowThresholdPercent: 80},
		Scheduled: true, Disk: &Disk{Capacity: 1000, Available: 500}}
	got := Choose(in, []Candidate{cand(1, 1, 40*day, 31*day), cand(2, 1, 40*day, 4*day)})
	want := []string{
		"unused for 31d",
		"last needed 4d ago, within 720h0m0s; image filesystem at 50.0%, below the high threshold 85%",
	}
	var details []string
	for _, d := range got {
		details = append(details, d.Detail)
	}
	if diff := cmp.Diff(want, details); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
}

func TestSettingsValidate(t *testing.T) {
	cases := map[string]struct {
		s    Settings
		want string
	}{
		"defaults":            {s: Settings{MinAge: workerdefaults.MinAge}},
		"no minimum age":      {s: Settings{}},
		"negative min age":    {s: Settings{MinAge: -time.Second}, want: "--min-age: must not be negative"},
		"negative unused for": {s: Settings{UnusedFor: -time.Second}, want: "--unused-for: must not be negative"},
		"one threshold":       {s: Settings{HighThresholdPercent: 80}, want: "set both or neither"},
		"low not below high":  {s: Settings{HighThresholdPercent: 80, LowThresholdPercent: 80}, want: "must be below"},
		"over 100":            {s: Settings{HighThresholdPercent: 101, LowThresholdPercent: 80}, want: "must be in 1..100"},
		"thresholds":          {s: Settings{HighThresholdPercent: 85, LowThresholdPercent: 80}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
