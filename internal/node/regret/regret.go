// Package regret is the node's ledger of removals, kept to learn which of
// them were regretted: an image the remover removed that the node pulled
// back later cost a second download, and the retention policies and the
// operator want to know how often, how much and after how long.
//
// The ledger is a file in the node's state directory beside images.state,
// read and written under the same lock (nodestate.Lock) in the same
// critical sections, so that no worker's update is lost to another's. It is
// text, one image a line, so that it reads and writes in milliseconds within
// the remover's small memory limit:
//
//	eraser-regret-ledger 1
//	<image ID> <repository> <bytes> <removed at> <policy> <run> <returns> <last returned at> <bytes returned> <flags>
//
// Times are unix seconds (0: never); "-" stands for an empty repository,
// policy or run; flags are "-" or the letters p (pending: removed and not
// seen back since) and u (a return not yet reported).
//
// It is bounded (Bound): at most MaxEntries entries, none whose last event
// is older than MaxAge, oldest first out. A line is about 200 bytes (an
// image ID is 71, a repository a few dozen), so a full ledger is about
// 2 MB on disk and about as much in memory while a worker holds it.
package regret

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/util/atomicfile"
	"github.com/eraser-oss/eraser/internal/util/textcut"
)

// FileName is the ledger's name in the state directory.
const FileName = "removals.ledger"

const header = "eraser-regret-ledger 1"

// The ledger's bounds: a node removes a few hundred images a run at most,
// so MaxEntries holds months of removals, and a return after MaxAge is a
// new need, not a regret of that removal.
const (
	MaxEntries = 10000
	MaxAge     = 90 * 24 * time.Hour
)

// maxLine bounds a line: a repository name is at most 255 characters, and
// a longer line is damage, not a ledger.
const maxLine = 1024

// Entry is what the ledger knows of one image removed from the node.
type Entry struct {
	// Repository is the image's repository when it was removed ("" when
	// it had no name).
	Repository string
	// Bytes is what its removal freed, by the runtime's size of it.
	Bytes uint64
	// RemovedAt is when it was last removed.
	RemovedAt time.Time
	// Policy chose it for removal (a retention policy's name); Run is the
	// ImageJob that removed it ("" for "eraser node prune").
	Policy, Run string
	// Returns counts the times it came back after a removal.
	Returns int
	// LastReturnedAt is when it last came back; zero: never.
	LastReturnedAt time.Time
	// BytesReturned totals the bytes pulled back over its returns.
	BytesReturned uint64
	// Pending: removed and not seen back since.
	Pending bool
	// Unreported: a return counted that no report has told yet.
	Unreported bool
}

// lastEvent is what the bounds judge an entry's age by.
func (e Entry) lastEvent() time.Time {
	if e.LastReturnedAt.After(e.RemovedAt) {
		return e.LastReturnedAt
	}
	return e.RemovedAt
}

// Ledger maps image IDs to their entries.
type Ledger struct {
	entries map[string]Entry
	// New is set when there was no file.
	New bool
}

// New is an empty ledger, as for a node that never removed anything.
func New() *Ledger { return &Ledger{entries: map[string]Entry{}, New: true} }

// Get is the entry of an image, and whether the ledger has one.
func (l *Ledger) Get(id string) (Entry, bool) {
	e, ok := l.entries[id]
	return e, ok
}

// Len is how many images the ledger holds.
func (l *Ledger) Len() int { return len(l.entries) }

// Returns is how many times an image came back after a removal and when
// it last did (zero: never): what the retention policies weigh an image's
// expected cost of removal by.
func (l *Ledger) Returns(id string) (n int, last time.Time) {
	e := l.entries[id]
	return e.Returns, e.LastReturnedAt
}

// Removal is one image a run removed.
type Removal struct {
	ID, Repository string
	Bytes          uint64
	Policy, Run    string
}

// Record notes removals that took effect by at: each entry becomes pending
// until the image is seen again. An image removed before keeps its count of
// returns: a removal of what came back once is the riskier for it. The time
// is rounded up to the second, so that no reading of the node taken before
// the removal, in the same second, counts as a return.
func (l *Ledger) Record(at time.Time, removals []Removal) {
	t := ceilSecond(at)
	for _, r := range removals {
		if !validID(r.ID) {
			continue
		}
		e := l.entries[r.ID]
		e.Repository, e.Bytes, e.Policy, e.Run = clean(r.Repository), r.Bytes, clean(r.Policy), clean(r.Run)
		e.RemovedAt, e.Pending = t, true
		l.entries[r.ID] = e
	}
	l.Bound(at)
}

// Present is an image found on the node by a reading.
type Present struct {
	ID string
	// Bytes is its size as the runtime reports it (0: unknown), counted
	// where the removal's was not known.
	Bytes uint64
	// Arrived is when the runtime pulled or tagged it, zero when it does
	// not say.
	Arrived time.Time
}

// Return is a removed image found back on the node.
type Return struct {
	ID, Repository string
	// Bytes is what it took to pull it back: what its removal freed.
	Bytes       uint64
	Policy, Run string
	RemovedAt   time.Time
	ReturnedAt  time.Time
}

// After is the time from the removal to the return.
func (r Return) After() time.Duration { return r.ReturnedAt.Sub(r.RemovedAt) }

// Observe takes a reading of the node begun at readAt: each pending entry
// whose image is present again counts one return, and is pending no more
// (a later removal makes it pending again). Only a reading begun after the
// removal counts: a worker that read the node before a removal and waited
// for the lock saw the image before it went. The return is dated by the
// runtime's arrival time when it is known and after the removal, else by
// readAt. Observe returns the returns it counted.
func (l *Ledger) Observe(readAt time.Time, present []Present) []Return {
	var out []Return
	read := readAt.Unix()
	for _, p := range present {
		e, ok := l.entries[p.ID]
		// RemovedAt is rounded up to its second and the reading's second
		// rounded down: a reading in that second or later began after it.
		if !ok || !e.Pending || read < e.RemovedAt.Unix() {
			continue
		}
		back := time.Unix(read, 0).UTC()
		if p.Arrived.After(e.RemovedAt) && !p.Arrived.After(back) {
			back = p.Arrived.UTC().Truncate(time.Second)
		}
		// The same image ID is the same content: it took what its
		// removal freed to pull back. The runtime's size now stands in
		// where the removal's was not known.
		if e.Bytes == 0 {
			e.Bytes = p.Bytes
		}
		e.Pending, e.Unreported = false, true
		e.Returns++
		e.LastReturnedAt = back
		e.BytesReturned += e.Bytes
		l.entries[p.ID] = e
		out = append(out, Return{ID: p.ID, Repository: e.Repository, Bytes: e.Bytes, Policy: e.Policy, Run: e.Run, RemovedAt: e.RemovedAt, ReturnedAt: back})
	}
	l.Bound(readAt)
	sortReturns(out)
	return out
}

// TakeUnreported returns the returns that no report has told yet and marks
// them told: the collector counts a return it sees, and the remover of the
// same run, whose summary the manager reads, reports it. An image that came
// back twice between two reports is reported once, as its latest return
// (the ledger's totals count both).
func (l *Ledger) TakeUnreported() []Return {
	var out []Return
	for id, e := range l.entries {
		if !e.Unreported {
			continue
		}
		e.Unreported = false
		l.entries[id] = e
		out = append(out, Return{ID: id, Repository: e.Repository, Bytes: e.Bytes, Policy: e.Policy, Run: e.Run, RemovedAt: e.RemovedAt, ReturnedAt: e.LastReturnedAt})
	}
	sortReturns(out)
	return out
}

// sortReturns orders returns newest first, by ID among equals, so that a
// report that keeps a few keeps the newest.
func sortReturns(r []Return) {
	slices.SortFunc(r, func(a, b Return) int {
		if c := b.ReturnedAt.Compare(a.ReturnedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Bound drops the entries whose last event is older than MaxAge at now,
// then the oldest beyond MaxEntries. An unreported return is dropped too
// when it is that old: the bound is what the node pays.
func (l *Ledger) Bound(now time.Time) {
	cutoff := now.Add(-MaxAge)
	for id, e := range l.entries {
		if e.lastEvent().Before(cutoff) {
			delete(l.entries, id)
		}
	}
	if len(l.entries) <= MaxEntries {
		return
	}
	type aged struct {
		id string
		at time.Time
	}
	all := make([]aged, 0, len(l.entries))
	for id, e := range l.entries {
		all = append(all, aged{id, e.lastEvent()})
	}
	slices.SortFunc(all, func(a, b aged) int {
		return cmp.Or(a.at.Compare(b.at), strings.Compare(a.id, b.id))
	})
	for _, a := range all[:len(all)-MaxEntries] {
		delete(l.entries, a.id)
	}
}

// Path is the ledger file in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Load reads the ledger in dir. A missing file is an empty ledger with New
// set; an unreadable or malformed one is an error naming the file and line.
// The caller holds the node's state lock.
func Load(dir string) (*Ledger, error) {
	path := Path(dir)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("removal ledger %s: %w", path, err)
	}
	l, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("removal ledger %s: %w (delete the file to start the node's ledger again)", path, err)
	}
	return l, nil
}

// maxQuoted bounds what an error quotes of a line that does not parse.
const maxQuoted = 100

const lineForm = `"<image ID> <repository> <bytes> <removed at> <policy> <run> <returns> <last returned at> <bytes returned> <flags>"`

func parse(data []byte) (*Ledger, error) {
	l := &Ledger{entries: map[string]Entry{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, maxLine), maxLine)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != header {
				return nil, fmt.Errorf("line 1: want %q, got %q", header, textcut.Cut(text, maxQuoted))
			}
			continue
		}
		id, e, err := parseLine(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v: want %s, got %q", line, err, lineForm, textcut.Cut(text, maxQuoted))
		}
		if _, dup := l.entries[id]; dup {
			return nil, fmt.Errorf("line %d: image %s listed twice", line, id)
		}
		l.entries[id] = e
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if line == 0 {
		return nil, errors.New("empty file")
	}
	return l, nil
}

func parseLine(text string) (string, Entry, error) {
	f := strings.Split(text, " ")
	if len(f) != 10 {
		return "", Entry{}, fmt.Errorf("%d fields", len(f))
	}
	var e Entry
	id := f[0]
	if !validID(id) {
		return "", e, errors.New("no image ID")
	}
	var strs [3]string
	for i, k := range []int{1, 4, 5} {
		if !validWord(f[k]) {
			return "", e, fmt.Errorf("field %d is empty", k+1)
		}
		if f[k] != "-" {
			strs[i] = f[k]
		}
	}
	e.Repository, e.Policy, e.Run = strs[0], strs[1], strs[2]
	var nums [5]uint64
	for i, k := range []int{2, 3, 6, 7, 8} {
		n, err := strconv.ParseUint(f[k], 10, 63)
		if err != nil {
			return "", e, fmt.Errorf("field %d is not a number", k+1)
		}
		nums[i] = n
	}
	if nums[1] == 0 {
		return "", e, errors.New("no removal time")
	}
	if nums[2] > 1<<31 {
		return "", e, errors.New("too many returns")
	}
	e.Bytes, e.RemovedAt, e.Returns, e.BytesReturned = nums[0], unix(nums[1]), int(nums[2]), nums[4]
	if nums[3] > 0 {
		e.LastReturnedAt = unix(nums[3])
	}
	if (e.Returns == 0) != (nums[3] == 0) {
		return "", e, errors.New("returns and last return time disagree")
	}
	switch f[9] {
	case "-":
	case "p":
		e.Pending = true
	case "u":
		e.Unreported = true
	case "pu":
		e.Pending, e.Unreported = true, true
	default:
		return "", e, errors.New("flags are not -, p, u or pu")
	}
	if e.Unreported && e.Returns == 0 {
		return "", e, errors.New("an unreported return that was never counted")
	}
	return id, e, nil
}

func unix(s uint64) time.Time { return time.Unix(int64(s), 0).UTC() }

// validID is an image ID the runtime could give: one word of printable
// characters.
func validID(id string) bool { return validWord(id) && id != "-" }

func validWord(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// clean is a name the file can hold: one printable word, else "" (unknown).
func clean(s string) string {
	if !validWord(s) || s == "-" {
		return ""
	}
	return s
}

func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s.UTC()
}

// Save writes the ledger to dir, creating it, atomically: a reader sees the
// old file or the new one, never a part. The caller holds the node's state
// lock.
func Save(dir string, l *Ledger) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("removal ledger directory: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(l.entries) * 200)
	b.WriteString(header)
	b.WriteByte('\n')
	ids := make([]string, 0, len(l.entries))
	for id := range l.entries {
		ids = append(ids, id)
	}
	// Sorted, so that a file written twice from one ledger is the same.
	slices.Sort(ids)
	var num []byte
	word := func(s string) {
		b.WriteByte(' ')
		if s == "" {
			s = "-"
		}
		b.WriteString(s)
	}
	n := func(v uint64) {
		b.WriteByte(' ')
		num = strconv.AppendUint(num[:0], v, 10)
		b.Write(num)
	}
	for _, id := range ids {
		e := l.entries[id]
		if !validID(id) || e.RemovedAt.Unix() <= 0 {
			continue // never written, so the file stays readable
		}
		b.WriteString(id)
		word(clean(e.Repository))
		n(e.Bytes)
		n(uint64(e.RemovedAt.Unix()))
		word(clean(e.Policy))
		word(clean(e.Run))
		last := uint64(0)
		if e.Returns > 0 && e.LastReturnedAt.Unix() > 0 {
			last = uint64(e.LastReturnedAt.Unix())
		}
		returns := uint64(e.Returns)
		if last == 0 {
			returns = 0
		}
		n(returns)
		n(last)
		n(min(e.BytesReturned, 1<<63-1))
		flags := ""
		if e.Pending {
			flags += "p"
		}
		if e.Unreported && returns > 0 {
			flags += "u"
		}
		word(flags)
		b.WriteByte('\n')
	}
	if err := atomicfile.Write(Path(dir), b.Bytes()); err != nil {
		return fmt.Errorf("removal ledger %s: %w", Path(dir), err)
	}
	return nil
}

// Repository is an image's repository from the names the runtime lists
// for it (tags "repo:tag", digests "repo@sha256:..."): the first that
// names one, "" when none does.
func Repository(tags, digests []string) string {
	for _, t := range tags {
		name := t
		if at := strings.IndexByte(name, '@'); at >= 0 {
			name = name[:at]
		}
		if colon := strings.LastIndexByte(name, ':'); colon > strings.LastIndexByte(name, '/') {
			name = name[:colon]
		}
		if name != "" {
			return name
		}
	}
	for _, d := range digests {
		if at := strings.IndexByte(d, '@'); at > 0 {
			return d[:at]
		}
	}
	return ""
}
