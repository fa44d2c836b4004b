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

func listed(c Candidate) Candidate        { c.Listed = true; return c }
func vulnerable(c Candidate) Candidate    { c.Vulnerable = true; return c }
func own(c Candidate, b uint64) Candidate { c.OwnBytes = b; return c }

// returned: it came back n times, last ago.
func returned(c Candidate, n int, ago time.Duration) Candidate {
	c.Returns, c.LastReturned = n, now.Add(-ago)
	return c
}

// version: in repository repo, with newer versions newer than it.
func version(c Candidate, repo string, newer int) Candidate {
	c.Repository, c.Newer = repo, newer
	return c
}

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
			// The automatic choices follow the others, best score first
			// (equal sizes: the one needed least recently).
			want: []outcome{{2, Listed, ""}, {1, Unused, ""}, {0, Unused, ""}},
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
			want: []outcome{{1, "", workerresult.RecentlyUsed}, {2, "", workerresult.RecentlyUsed}, {4, "", workerresult.RecentlyUsed}, {5, Vulnerable, ""}, {0, UnusedFor, ""}, {3, UnusedFor, ""}},
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
		"at the high threshold, best score first until below the low one": {
			// 85% used: to fall below 80% at least 6 bytes must go.
			in: Input{Now: now, Settings: disk, Scheduled: true, Disk: &Disk{Capacity: 100, Available: 15}},
			cands: []Candidate{
				cand(0, 3, 5*day, time.Hour),  // 3 / 25: used an hour ago
				cand(1, 2, 9*day, 0),          // 2 / 1.11 = 1.8
				cand(2, 3, 7*day, 6*day),      // 3 / 1.17 = 2.57: second
				cand(3, 50, 5*time.Minute, 0), // 50 / 241
				cand(4, 4, 3*day, 2*day),      // 4 / 1.5 = 2.67: first
			},
			// 4 and 2 free 7 bytes: 78 used, below 80.
			want: []outcome{{4, DiskPressure, ""}, {2, DiskPressure, ""}, {1, "", workerresult.NotNeeded}, {3, "", workerresult.NotNeeded}, {0, "", workerresult.NotNeeded}},
		},
		"equal sizes: least recently used first": {
			in:    Input{Now: now, Settings: disk, Scheduled: true, Disk: &Disk{Capacity: 100, Available: 15}},
			cands: []Candidate{cand(0, 3, 100*time.Second, 0), cand(1, 3, 130*time.Second, 0), cand(2, 3, 110*time.Second, 0), cand(3, 3, 90*time.Second, 0)},
			want:  []outcome{{1, DiskPressure, ""}, {2, DiskPressure, ""}, {0, "", workerresult.NotNeeded}, {3, "", workerresult.NotNeeded}},
		},
		"own bytes count, not the size": {
			in:    Input{Now: now, Settings: disk, Scheduled: true, Disk: &Disk{Capacity: 100, Available: 15}},
			cands: []Candidate{own(cand(0, 20, 9*day, 0), 1), own(cand(1, 8, 9*day, 0), 8)},
			want:  []outcome{{1, DiskPressure, ""}, {0, "", workerresult.NotNeeded}},
		},
		"a return costs: the image that came back goes last": {
			in: Input{Now: now, Settings: Settings{HighThresholdPercent: 85, LowThresholdPercent: 80, CoolDown: day}, Scheduled: true, Disk: &Disk{Capacity: 100, Available: 15}},
			// 1 came back 20 days ago: out of its hold, but costlier.
			cands: []Candidate{cand(0, 6, 9*day, 0), returned(cand(1, 6, 9*day, 0), 1, 20*day), cand(2, 5, 9*day, 0)},
			want:  []outcome{{0, DiskPressure, ""}, {2, "", workerresult.NotNeeded}, {1, "", workerresult.NotNeeded}},
		},
		"keepVersions: the versions with that many newer go": {
			in: Input{Now: now, Settings: Settings{KeepVersions: 2}, Scheduled: true},
			cands: []Candidate{
				version(cand(0, 1, 9*day, 0), "r", 4),
				version(cand(1, 1, 9*day, 0), "r", 2),
				version(cand(2, 1, 9*day, 0), "r", 1),
				version(cand(3, 1, 9*day, 0), "", 0),
				listed(version(cand(4, 1, 9*day, 0), "r", 0)),
			},
			want: []outcome{{2, "", workerresult.NotNeeded}, {3, "", workerresult.NotNeeded}, {4, Listed, ""}, {0, Superseded, ""}, {1, Superseded, ""}},
		},
		"keepVersions after unusedFor, before the disk": {
			in: Input{Now: now, Settings: Settings{UnusedFor: 30 * day, KeepVersions: 1, HighThresholdPercent: 85, LowThresholdPercent: 80},
				Scheduled: true, Disk: &Disk{Capacity: 100, Available: 50}},
			cands: []Candidate{version(cand(0, 1, 40*day, 0), "r", 1), version(cand(1, 1, 2*day, 0), "r", 1), version(cand(2, 1, 2*day, 0), "r", 0)},
			// 2 is the newest: the disk policy's to judge, below its threshold.
			want: []outcome{{0, UnusedFor, ""}, {1, Superseded, ""}, {2, "", workerresult.RecentlyUsed}},
		},
		"keepVersions is not applied outside scheduled runs": {
			in:    Input{Now: now, Settings: Settings{KeepVersions: 1}},
			cands: []Candidate{version(cand(0, 1, 40*day, 0), "r", 3)},
			want:  []outcome{{0, "", ""}},
		},
		"cooling down: every automatic policy keeps an image within its hold": {
			in: Input{Now: now, Settings: Settings{CoolDown: day}, Sweep: true},
			cands: []Candidate{
				returned(cand(0, 1, 9*day, 0), 1, 23*time.Hour), // held a day
				returned(cand(1, 1, 9*day, 0), 1, 25*time.Hour), // out of it
				returned(cand(2, 1, 9*day, 0), 3, 3*day),        // held 4 days
				returned(cand(3, 1, 9*day, 0), 6, 29*day),       // 32 days, capped at 30
				listed(returned(cand(4, 1, 9*day, 0), 1, time.Hour)),
				vulnerable(returned(cand(5, 1, 9*day, 0), 1, time.Hour)),
			},
			want: []outcome{{0, "", workerresult.CoolingDown}, {2, "", workerresult.CoolingDown}, {3, "", workerresult.CoolingDown},
				{4, Listed, ""}, {5, "", workerresult.CoolingDown}, {1, Unused, ""}},
		},
		"cooling down under disk pressure and keepVersions": {
			in: Input{Now: now, Settings: Settings{CoolDown: day, KeepVersions: 1, HighThresholdPercent: 85, LowThresholdPercent: 80},
				Scheduled: true, Disk: &Disk{Capacity: 100, Available: 10}},
			cands: []Candidate{returned(cand(0, 50, 9*day, 0), 1, time.Hour), version(returned(cand(1, 1, 9*day, 0), 2, day), "r", 1), cand(2, 20, 9*day, 0)},
			want:  []outcome{{0, "", workerresult.CoolingDown}, {1, "", workerresult.CoolingDown}, {2, DiskPressure, ""}},
		},
		"cool-down off: a return only costs": {
			in:    Input{Now: now, Settings: Settings{}, Sweep: true},
			cands: []Candidate{returned(cand(0, 1, 9*day, 0), 1, time.Minute)},
			want:  []outcome{{0, Unused, ""}},
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
