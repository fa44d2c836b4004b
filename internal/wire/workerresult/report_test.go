package workerresult

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeStaysUnderLimit(t *testing.T) {
	s := Summary{Component: "remover", Node: strings.Repeat("n", 253), Counts: map[string]int{"removed": 3, "failed": 100}, Error: strings.Repeat("e", 10000)}
	for i := range 100 {
		s.AddFailure(strings.Repeat("i", 600), strings.Repeat("m", 5000)+string(rune('a'+i%26)))
	}
	data := s.Encode()
	if len(data) > MaxSize {
		t.Fatalf("encoded summary is %d bytes", len(data))
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Counts["failed"] != 100 || len(got.Failures) == 0 || len(got.Failures) > maxFailures {
		t.Errorf("decoded %+v", got)
	}
}

func TestRoundTrip(t *testing.T) {
	s := Summary{Component: "collector", Node: "n1", DryRun: true, Counts: map[string]int{"candidates": 2}, BytesFreed: 42, PeakRSSBytes: 1 << 20}
	got, err := Decode(s.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := Decode([]byte("OOMKilled")); err == nil {
		t.Error("a non-JSON termination message decoded")
	}
}

func TestEncodeKeepsWhatFitsOfTheVerdicts(t *testing.T) {
	s := Summary{Component: "scanner", Counts: map[string]int{"vulnerable": 2000}}
	for i := range 2000 {
		s.Verdicts = append(s.Verdicts, Verdict{Image: strings.Repeat("r", 60) + string(rune('a'+i%26)), Verdict: "vulnerable", Remove: true, Reason: "CVE-2099-0001"})
	}
	data := s.Encode()
	if len(data) > MaxSize {
		t.Fatalf("encoded summary is %d bytes", len(data))
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Verdicts) == 0 || len(got.Verdicts)+got.VerdictsOmitted != 2000 {
		t.Errorf("kept %d verdicts, omitted %d; want some kept and all accounted for", len(got.Verdicts), got.VerdictsOmitted)
	}
}

func TestFreedBytes(t *testing.T) {
	for name, tc := range map[string]struct {
		bytesFreed uint64
		freed      *Freed
		want       int64
	}{
		"measured on the image filesystem": {1764346, &Freed{ExpectedBytes: 3 << 20, MeasuredBytes: 4 << 20, MeasuredBy: "imagefs"}, 4 << 20},
		"measured, the filesystem grew":    {10, &Freed{ExpectedBytes: 1, MeasuredBytes: -5, MeasuredBy: "runtime"}, -5},
		"a dry run: expected only":         {9 << 20, &Freed{ExpectedBytes: 4 << 20}, 4 << 20},
		"expected, measuring failed":       {9, &Freed{ExpectedBytes: 7, Error: "statfs: no such file"}, 7},
		"neither could be read":            {9, &Freed{Error: "no records"}, 9},
		"no records at all":                {9, nil, 9},
	} {
		t.Run(name, func(t *testing.T) {
			if got := FreedBytes(tc.bytesFreed, tc.freed); got != tc.want {
				t.Errorf("FreedBytes = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestImageFsRelief(t *testing.T) {
	const mib = 1 << 20
	cases := map[string]struct {
		fs   ImageFs
		want string
	}{
		"not under pressure": {fs: ImageFs{CapacityBytes: 100 * mib, UsedBeforeBytes: 50 * mib, UsedAfterBytes: 50 * mib}},
		"reached": {fs: ImageFs{CapacityBytes: 100 * mib, UsedBeforeBytes: 90 * mib, UsedAfterBytes: 79 * mib, TargetBytes: 80 * mib, TargetReached: true, TimeToTargetMs: 1234.5, FreedToTargetBytes: 11 * mib},
			want: "disk pressure: below the target 80.0MiB (80.0% of 100.0MiB) 1.235s after the first removal for it, 11.0MiB freed"},
		"reached by the other policies": {fs: ImageFs{CapacityBytes: 100 * mib, UsedBeforeBytes: 90 * mib, UsedAfterBytes: 70 * mib, TargetBytes: 80 * mib, TargetReached: true},
			want: "disk pressure: below the target 80.0MiB (80.0% of 100.0MiB) with no removal for it"},
		"not reached": {fs: ImageFs{CapacityBytes: 100 * mib, UsedBeforeBytes: 90 * mib, UsedAfterBytes: 85 * mib, TargetBytes: 80 * mib},
			want: "disk pressure: still at or above the target 80.0MiB (80.0% of 100.0MiB), 85.0% used"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.fs.Relief(); got != tc.want {
				t.Errorf("Relief() = %q, want %q", got, tc.want)
			}
		})
	}
}
