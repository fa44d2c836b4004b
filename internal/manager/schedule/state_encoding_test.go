package schedule

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

// longNodeName is a 253-character DNS subdomain, as a cloud might name
// node i: a label of its own (a pool, a 40-hex-digit id, the index), then
// labels every node shares.
func longNodeName(i int) string {
	id := sha256.Sum256([]byte(strconv.Itoa(i)))
	shared := strings.Repeat("abcdefghi", 7)[:63]
	return fmt.Sprintf("pool-%x-%015d.%s.%s.%s", id[:20], i, shared, shared, shared)
}

// randomNodeName is a 253-character name with nothing to compress: the
// worst case, not a cluster's.
func randomNodeName(r *rand.Rand) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 253)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	for _, i := range []int{63, 127, 191} {
		b[i] = '.'
	}
	return string(b)
}

func coverageOf(names []string, cleaned time.Time, tried []string, triedAt time.Time) Coverage {
	c := Coverage{Since: c0.Add(-30 * 24 * time.Hour), LastRun: cleaned, Cleaned: map[string]time.Time{}, Tried: map[string]time.Time{}}
	for _, n := range names {
		c.Cleaned[n] = cleaned
	}
	for _, n := range tried {
		c.Tried[n] = triedAt
	}
	return c
}

func names(n int, name func(int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name(i)
	}
	return out
}

// TestStateRoundTrip: every state comes back as it was written, small
// records as JSON (readable with kubectl), large ones compact.
func TestStateRoundTrip(t *testing.T) {
	long := names(3000, longNodeName)
	cases := map[string]struct {
		st      State
		compact bool
	}{
		"nothing yet":        {st: State{}},
		"times, no record":   {st: State{LastStart: c0, LastEnd: c0.Add(time.Hour), LastSuccess: c0.Add(time.Hour)}},
		"scheduled since":    {st: State{ScheduledSince: c0}},
		"record begun":       {st: State{LastStart: c0, Coverage: Coverage{Since: c0, Cleaned: map[string]time.Time{}, Tried: map[string]time.Time{}}}},
		"small record":       {st: State{LastStart: c0, Coverage: coverageOf([]string{"a", "b"}, c0, []string{"c"}, c0.Add(time.Hour))}},
		"3,000 long names":   {st: State{LastStart: c0, Coverage: coverageOf(long, c0, long[:100], c0.Add(time.Hour))}, compact: true},
		"tried before since": {st: State{Coverage: coverageOf(long, c0.Add(-40*24*time.Hour), long, c0)}, compact: true},
	}
	got, want := map[string]State{}, map[string]State{}
	for name, tc := range cases {
		data, bin, err := encodeState(tc.st, stateLimit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := bin[keyCoverage]; ok != tc.compact {
			t.Errorf("%s: compact %v, want %v", name, ok, tc.compact)
		}
		st, err := decodeState(data, bin)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name], want[name] = st, tc.st
		if !tc.st.Coverage.Known() {
			want[name] = State{LastStart: tc.st.LastStart, LastEnd: tc.st.LastEnd, LastSuccess: tc.st.LastSuccess, ScheduledSince: tc.st.ScheduledSince,
				Coverage: Coverage{Cleaned: map[string]time.Time{}, Tried: map[string]time.Time{}}}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestStateReadsJSONForm: a state the JSON form wrote (every release
// before the compact form, and small records still) is read whole, and
// written again compact once it is large.
func TestStateReadsJSONForm(t *testing.T) {
	long := names(2000, longNodeName)
	cleaned, tried := map[string]string{}, map[string]string{}
	for i, n := range long {
		cleaned[n] = strconv.FormatInt(c0.Unix(), 10)
		if i%2 == 0 {
			tried[n] = strconv.FormatInt(c0.Add(-time.Hour).Unix(), 10)
		}
	}
	obj := func(m map[string]string) string {
		var parts []string
		for k, v := range m {
			parts = append(parts, strconv.Quote(k)+":"+v)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	data := map[string]string{
		schedtimes.KeyLastStart: "2026-12-01T00:00:00Z", schedtimes.KeyLastEnd: "2026-12-01T00:10:00Z", schedtimes.KeyLastSuccess: "2026-12-01T00:10:00Z",
		keySince: "2026-11-01T00:00:00Z", keyLastRun: "2026-12-01T00:00:00Z",
		keyCleaned: obj(cleaned), keyTried: obj(tried),
	}
	st, err := decodeState(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := State{LastStart: c0, LastEnd: c0.Add(10 * time.Minute), LastSuccess: c0.Add(10 * time.Minute),
		Coverage: Coverage{Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), LastRun: c0, Cleaned: map[string]time.Time{}, Tried: map[string]time.Time{}}}
	for i, n := range long {
		want.Coverage.Cleaned[n] = c0
		if i%2 == 0 {
			want.Coverage.Tried[n] = c0.Add(-time.Hour)
		}
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("JSON form read (-want +got):\n%s", diff)
	}
	out, bin, err := encodeState(st, stateLimit)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out[keyCleaned]; ok || bin[keyCoverage] == nil {
		t.Errorf("written again with keys %v and binary %v: want the compact form", keysOf(out), len(bin[keyCoverage]))
	}
	again, err := decodeState(out, bin)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("JSON form written compact and read (-want +got):\n%s", diff)
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestStateTooLarge: a record over the bound is left out before anything
// is sent, with an error that says so; the schedule's times are kept.
func TestStateTooLarge(t *testing.T) {
	long := names(3000, longNodeName)
	st := State{LastStart: c0, LastEnd: c0.Add(time.Hour), Coverage: coverageOf(long, c0, nil, time.Time{})}
	cases := map[string]struct {
		limit   int
		tooBig  bool
		wantSet []string
	}{
		"fits":      {limit: stateLimit, wantSet: []string{keySince, schedtimes.KeyLastEnd, keyLastRun, schedtimes.KeyLastStart}},
		"too large": {limit: 1000, tooBig: true, wantSet: []string{schedtimes.KeyLastEnd, schedtimes.KeyLastStart}},
	}
	type result struct {
		TooLarge bool
		Keys     []string
		Binary   bool
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		data, bin, err := encodeState(st, tc.limit)
		if err != nil && !errors.Is(err, errStateTooLarge) {
			t.Fatalf("%s: %v", name, err)
		}
		keys := keysOf(data)
		slices.Sort(keys)
		got[name] = result{TooLarge: err != nil, Keys: keys, Binary: bin != nil}
		want[name] = result{TooLarge: tc.tooBig, Keys: tc.wantSet, Binary: !tc.tooBig}
		if err != nil && !strings.Contains(err.Error(), "3000 nodes") {
			t.Errorf("%s: the error does not count the nodes: %v", name, err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("size guard (-want +got):\n%s", diff)
	}
}

// TestStateUnreadable: a damaged record is an error and an empty record
// (nothing due), never a stop; the schedule's times survive it.
func TestStateUnreadable(t *testing.T) {
	base := map[string]string{schedtimes.KeyLastStart: "2026-12-01T00:00:00Z", keySince: "2026-11-01T00:00:00Z"}
	cases := map[string]map[string][]byte{
		"not gzip":        {keyCoverage: []byte("nodes")},
		"bad line":        {keyCoverage: mustGzip(t, "a 1\n")},
		"bad number":      {keyCoverage: mustGzip(t, "a x -\n")},
		"truncated gzip ": {keyCoverage: mustGzip(t, "a 1 -\n")[:10]},
	}
	for name, bin := range cases {
		st, err := decodeState(base, bin)
		if err == nil {
			t.Errorf("%s: read without an error", name)
		}
		if diff := cmp.Diff(State{LastStart: c0}, st, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func mustGzip(t *testing.T, s string) []byte {
	t.Helper()
	z, err := jobdata.Gzip([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// TestStateSizeAt10000Nodes measures the state of 10,000 nodes with
// 253-character names: after a scheduled run (every node cleaned), and
// with a catch-up of every node in flight (every node tried as well).
// Names with nothing in common do not fit; the guard says so.
func TestStateSizeAt10000Nodes(t *testing.T) {
	const n = 10000
	long := names(n, longNodeName)
	r := rand.New(rand.NewPCG(1, 2))
	random := names(n, func(int) string { return randomNodeName(r) })
	cases := map[string]struct {
		st   State
		fits bool
	}{
		"cleaned":               {st: State{LastStart: c0, Coverage: coverageOf(long, c0, nil, time.Time{})}, fits: true},
		"cleaned and tried":     {st: State{LastStart: c0, Coverage: coverageOf(long, c0.Add(-24*time.Hour), long, c0)}, fits: true},
		"random names, cleaned": {st: State{LastStart: c0, Coverage: coverageOf(random, c0, nil, time.Time{})}},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		data, bin, err := encodeState(tc.st, stateLimit)
		size := 0
		for _, v := range data {
			size += len(v)
		}
		for _, v := range bin {
			size += len(v)
		}
		if err != nil {
			z, _ := compactTimes(tc.st.Coverage)
			size = len(z)
			if !errors.Is(err, errStateTooLarge) {
				t.Fatalf("%s: %v", name, err)
			}
		}
		t.Logf("%s: %d nodes, %d bytes (%.1f a node); limit %d", name, n, size, float64(size)/n, stateLimit)
		got[name], want[name] = err == nil, tc.fits
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fits (-want +got):\n%s", diff)
	}
}

// FuzzDecodeState: whatever the state ConfigMap holds (anyone who may edit
// it can write anything), reading it never panics, and a record it reads
// is written again and read back the same.
func FuzzDecodeState(f *testing.F) {
	z, err := jobdata.Gzip([]byte("a 0 -\nb -3600 60\n"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("2026-11-01T00:00:00Z", `{"a":1764547200}`, `{}`, z)
	f.Add("", "", "", []byte(nil))
	f.Add("2026-11-01T00:00:00Z", `{"a":"x"}`, `[`, []byte("not gzip"))
	f.Fuzz(func(t *testing.T, since, cleaned, tried string, compact []byte) {
		data := map[string]string{keySince: since, keyCleaned: cleaned, keyTried: tried}
		var bin map[string][]byte
		if compact != nil {
			bin = map[string][]byte{keyCoverage: compact}
		}
		st, err := decodeState(data, bin)
		if err != nil || !st.Coverage.Known() {
			return
		}
		out, outBin, err := encodeState(st, stateLimit)
		if err != nil {
			return
		}
		again, err := decodeState(out, outBin)
		if err != nil {
			t.Fatalf("a record read and written again is unreadable: %v", err)
		}
		if diff := cmp.Diff(st.Coverage.Cleaned, again.Coverage.Cleaned, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cleaned changed (-read +again):\n%s", diff)
		}
	})
}
