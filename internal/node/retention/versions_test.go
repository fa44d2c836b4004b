package retention

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStandings(t *testing.T) {
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	cases := map[string]struct {
		n        int
		versions []Version
		want     []Standing
	}{
		"by arrival, newest first": {
			n: 3,
			versions: []Version{
				{Image: 0, ID: "a", Repository: "r", Tag: "3", Arrived: at(3 * day)},
				{Image: 1, ID: "b", Repository: "r", Tag: "1", Arrived: at(day)},
				{Image: 2, ID: "c", Repository: "r", Tag: "2", Arrived: at(2 * day)},
			},
			want: []Standing{{"r", 2}, {"r", 0}, {"r", 1}},
		},
		"same arrival: by tag as versions, then by ID": {
			n: 4,
			versions: []Version{
				{Image: 0, ID: "a", Repository: "r", Tag: "1.9", Arrived: at(day)},
				{Image: 1, ID: "b", Repository: "r", Tag: "1.10", Arrived: at(day)},
				{Image: 2, ID: "c", Repository: "r", Arrived: at(day)},
				{Image: 3, ID: "d", Repository: "r", Arrived: at(day)},
			},
			want: []Standing{{"r", 1}, {"r", 0}, {"r", 3}, {"r", 2}},
		},
		"several tags of one image are one version": {
			n: 2,
			versions: []Version{
				{Image: 0, ID: "a", Repository: "r", Tag: "1", Arrived: at(day)},
				{Image: 0, ID: "a", Repository: "r", Tag: "latest", Arrived: at(day)},
				{Image: 0, ID: "a", Repository: "r", Arrived: at(day)},
				{Image: 1, ID: "b", Repository: "r", Arrived: at(2 * day)},
			},
			want: []Standing{{"r", 0}, {"r", 1}},
		},
		"in several repositories: where it is newest": {
			n: 3,
			versions: []Version{
				{Image: 0, ID: "a", Repository: "mirror/r", Tag: "1", Arrived: at(3 * day)},
				{Image: 0, ID: "a", Repository: "r", Tag: "1", Arrived: at(3 * day)},
				{Image: 1, ID: "b", Repository: "r", Tag: "2", Arrived: at(2 * day)},
				{Image: 2, ID: "c", Repository: "r", Tag: "3", Arrived: at(day)},
			},
			want: []Standing{{"mirror/r", 0}, {"r", 1}, {"r", 0}},
		},
		"no repository: stands nowhere": {
			n:        2,
			versions: []Version{{Image: 1, ID: "b", Repository: "r", Arrived: at(day)}, {Image: 7, Repository: "r"}},
			want:     []Standing{{}, {"r", 0}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Standings(tc.n, tc.versions)); diff != "" {
				t.Errorf("Standings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareTags(t *testing.T) {
	// Each is before the next: text before numbers.
	ordered := []string{"", "a", "latest", "v1", "v2", "v10", "1", "1.2", "1.9", "1.10", "1.10.1", "2", "10"}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := CompareTags(a, b); got != want {
				t.Errorf("CompareTags(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
	if CompareTags("01", "1") == 0 {
		t.Error("01 and 1 compare equal: the order would depend on the input's")
	}
}

func TestHold(t *testing.T) {
	s := Settings{CoolDown: day}
	want := map[int]time.Duration{0: 0, 1: day, 2: 2 * day, 3: 4 * day, 5: 16 * day, 6: MaxHold, 1000: MaxHold}
	for n, w := range want {
		if got := s.Hold(n); got != w {
			t.Errorf("Hold(%d) = %v, want %v", n, got, w)
		}
	}
	if got := (Settings{}).Hold(3); got != 0 {
		t.Errorf("cool-down off: Hold = %v", got)
	}
}

func TestCoolingDownDetail(t *testing.T) {
	in := Input{Now: now, Settings: Settings{CoolDown: day}, Sweep: true}
	got := Choose(in, []Candidate{returned(cand(0, 1, 9*day, 0), 2, 3*time.Hour), version(cand(1, 1, 9*day, 0), "docker.io/library/app", 3)})
	want := []Decision{{Index: 0, Kept: "cooling down", Detail: "came back 2 times after a removal, last 3h0m0s ago; held until 2026-12-03T09:00:00Z"}, {Index: 1, Policy: Unused}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	in = Input{Now: now, Settings: Settings{KeepVersions: 2}, Scheduled: true}
	got = Choose(in, []Candidate{version(cand(0, 1, 9*day, 0), "docker.io/library/app", 3), version(cand(1, 1, 9*day, 0), "docker.io/library/app", 1)})
	want = []Decision{
		{Index: 1, Kept: "not needed", Detail: "among the 2 newest versions of docker.io/library/app on the node (1 newer)"},
		{Index: 0, Policy: Superseded, Detail: "3 newer versions of docker.io/library/app on the node"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
