// The state ConfigMap's encoding. Small per-node records are JSON that
// kubectl shows as it is; larger ones are compact: each node's name once,
// its two times relative to the record's start, compressed. A record that
// would still take the ConfigMap past an object's limit is left out, said
// so, and started again, rather than refused by the API server: the
// schedule's rhythm and the jobs' cleanup never wait on it.

package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

const (
	// keyScheduledSince is State.ScheduledSince.
	keyScheduledSince = "scheduledSince"
	// keyCoverage holds the compact form of the per-node record, in
	// binaryData: gzip of one "name cleaned tried" line per node, the
	// times in seconds from coverageSince, "-" for none.
	keyCoverage = "coverage.gz"
	// plainCoverageMax is the size up to which the per-node record is
	// written as JSON: a few hundred nodes of any name length, a couple of
	// thousand of short ones.
	plainCoverageMax = 64 << 10
)

// errStateTooLarge is a per-node record that does not fit in the state
// ConfigMap even compact; the state is written without it.
var errStateTooLarge = errors.New("the schedule's per-node record does not fit in its ConfigMap")

// encodeState is the state ConfigMap's data and binaryData. When the
// per-node record would take the values past limit bytes, it is left out
// and the error (errStateTooLarge) comes with the state without it.
func encodeState(st State, limit int) (map[string]string, map[string][]byte, error) {
	data := map[string]string{}
	st.times().Write(data)
	if !st.ScheduledSince.IsZero() {
		data[keyScheduledSince] = st.ScheduledSince.UTC().Format(time.RFC3339)
	}
	c := st.Coverage
	if !c.Known() {
		return data, nil, nil
	}
	cov, bin, err := encodeCoverage(c)
	if err != nil {
		return nil, nil, err
	}
	size := 0
	for _, v := range data {
		size += len(v)
	}
	for _, v := range cov {
		size += len(v)
	}
	for _, v := range bin {
		size += len(v)
	}
	if size > limit {
		return data, nil, fmt.Errorf("%w: %d nodes take %d bytes, more than the %d the ConfigMap holds; written without it, so no node is due for a catch-up until it fits",
			errStateTooLarge, len(nodeNames(c)), size, limit)
	}
	for k, v := range cov {
		data[k] = v
	}
	return data, bin, nil
}

// decodeState reads the state ConfigMap's data and binaryData, in either
// form of the per-node record. A record that cannot be read comes back
// empty (with Since unset, so that no node counts as having missed a run)
// with the error: coverage is a convenience, never a reason to stop the
// schedule.
func decodeState(data map[string]string, bin map[string][]byte) (State, error) {
	var st State
	t := schedtimes.Read(data)
	st.LastStart, st.LastEnd, st.LastSuccess = t.LastStart, t.LastEnd, t.LastSuccess
	st.ScheduledSince, _ = time.Parse(time.RFC3339, data[keyScheduledSince])
	c, err := decodeCoverage(data, bin)
	if err != nil {
		return st, err
	}
	st.Coverage = c
	return st, nil
}

// encodeCoverage writes a known record as JSON when small, compact
// otherwise.
func encodeCoverage(c Coverage) (map[string]string, map[string][]byte, error) {
	data := map[string]string{keySince: c.Since.UTC().Format(time.RFC3339)}
	if !c.LastRun.IsZero() {
		data[keyLastRun] = c.LastRun.UTC().Format(time.RFC3339)
	}
	cleaned, err := encodeTimes(c.Cleaned)
	if err != nil {
		return nil, nil, err
	}
	tried, err := encodeTimes(c.Tried)
	if err != nil {
		return nil, nil, err
	}
	if len(cleaned)+len(tried) <= plainCoverageMax {
		data[keyCleaned], data[keyTried] = cleaned, tried
		return data, nil, nil
	}
	z, err := compactTimes(c)
	if err != nil {
		return nil, nil, err
	}
	return data, map[string][]byte{keyCoverage: z}, nil
}

func decodeCoverage(data map[string]string, bin map[string][]byte) (Coverage, error) {
	var c Coverage
	c.Since, _ = time.Parse(time.RFC3339, data[keySince])
	c.LastRun, _ = time.Parse(time.RFC3339, data[keyLastRun])
	var err error
	if z, ok := bin[keyCoverage]; ok {
		c.Cleaned, c.Tried, err = readCompact(z, c.Since)
	} else {
		var errC, errT error
		c.Cleaned, errC = decodeTimes(data[keyCleaned])
		c.Tried, errT = decodeTimes(data[keyTried])
		err = errors.Join(errC, errT)
	}
	if err != nil {
		return Coverage{}, err
	}
	return c, nil
}

// nodeNames are the nodes of either map, in name order.
func nodeNames(c Coverage) []string {
	names := make([]string, 0, len(c.Cleaned)+len(c.Tried))
	for n := range c.Cleaned {
		names = append(names, n)
	}
	for n := range c.Tried {
		if _, ok := c.Cleaned[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// compactTimes is the compact form: in name order, so that neighbouring
// names (which share most of their characters) compress well.
func compactTimes(c Coverage) ([]byte, error) {
	var raw bytes.Buffer
	rel := func(m map[string]time.Time, n string) string {
		t, ok := m[n]
		if !ok {
			return "-"
		}
		return strconv.FormatInt(t.Unix()-c.Since.Unix(), 10)
	}
	for _, n := range nodeNames(c) {
		fmt.Fprintf(&raw, "%s %s %s\n", n, rel(c.Cleaned, n), rel(c.Tried, n))
	}
	return jobdata.Gzip(raw.Bytes())
}

// readCompactMax bounds what the compact form may expand to: far more
// than 10,000 nodes of the longest names take, so a damaged or hand-made
// value cannot take the manager's memory.
const readCompactMax = 64 << 20

func readCompact(z []byte, since time.Time) (cleaned, tried map[string]time.Time, err error) {
	raw, err := jobdata.Gunzip(z, readCompactMax)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyCoverage, err)
	}
	cleaned, tried = map[string]time.Time{}, map[string]time.Time{}
	for i, text := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("%s line %d: want \"node cleaned tried\", got %.80q", keyCoverage, i+1, text)
		}
		for k, m := range []map[string]time.Time{cleaned, tried} {
			if f[k+1] == "-" {
				continue
			}
			s, err := strconv.ParseInt(f[k+1], 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%s line %d: %w", keyCoverage, i+1, err)
			}
			m[f[0]] = time.Unix(since.Unix()+s, 0).UTC()
		}
	}
	return cleaned, tried, nil
}

func encodeTimes(m map[string]time.Time) (string, error) {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.Unix()
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func decodeTimes(s string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if s == "" {
		return out, nil
	}
	var in map[string]int64
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("want a JSON object of node names to unix seconds: %w", err)
	}
	for k, v := range in {
		out[k] = time.Unix(v, 0).UTC()
	}
	return out, nil
}
