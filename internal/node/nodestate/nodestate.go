// Package nodestate is the small file each node keeps across runs, for what
// the runtime forgets: when Eraser first saw each image, and when it last
// saw a container using it. The kubelet garbage-collects exited containers,
// so without this an image used yesterday would look never used today.
//
// The file is text, one image per line, so that tens of thousands of images
// read and write in a few milliseconds within the remover's small memory
// limit:
//
//	eraser-node-state 1
//	sha256:<hex> <first seen, unix seconds> <last used, unix seconds or 0>
//
// Several workers may run on a node at once (the collector, removers of
// overlapping runs, "eraser node prune"): each loads, merges its reading and
// saves under an exclusive lock on images.state.lock (lock.go), so that no
// worker's update is lost to another's rename.
package nodestate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/util/atomicfile"
	"github.com/eraser-oss/eraser/internal/util/textcut"
)

// FileName is the state file's name in the state directory.
const FileName = "images.state"

const header = "eraser-node-state 1"

// Entry is what is known of one image.
type Entry struct {
	FirstSeen time.Time
	// LastUsed is zero when no container was seen using the image.
	LastUsed time.Time
}

// record is an Entry as the state holds it: unix seconds, and the reading
// that last saw the image, so a reading updates the map in place (tens of
// thousands of images, in the remover's small memory limit).
type record struct {
	first, last int64
	seen        uint32
}

// State maps image IDs to what is known of them.
type State struct {
	images  map[string]record
	reading uint32
	// New is set when there was no file: the node has no history.
	New bool
}

// NewState is an empty state, as for a node with no history.
func NewState() *State { return &State{images: map[string]record{}, New: true} }

// Get is what is known of an image (zero times when nothing).
func (s *State) Get(id string) Entry {
	r, ok := s.images[id]
	if !ok {
		return Entry{}
	}
	e := Entry{FirstSeen: time.Unix(r.first, 0).UTC()}
	if r.last > 0 {
		e.LastUsed = time.Unix(r.last, 0).UTC()
	}
	return e
}

// Len is how many images the state knows.
func (s *State) Len() int { return len(s.images) }

// Path is the state file in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Load reads the state in dir. A missing file is an empty state with New
// set; an unreadable or malformed one is an error naming the file, so that
// a damaged history never passes for a node that used nothing.
func Load(dir string) (*State, error) {
	path := Path(dir)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("node state %s: %w", path, err)
	}
	s, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("node state %s: %w (delete the file to start the node's history again)", path, err)
	}
	return s, nil
}

// maxQuoted bounds what an error quotes of a line that does not parse.
const maxQuoted = 100

func parse(data []byte) (*State, error) {
	s := &State{images: map[string]record{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 4096)
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
		id, first, last, ok := splitLine(text)
		if !ok {
			return nil, fmt.Errorf("line %d: want \"<image ID> <first seen> <last used>\", got %q", line, textcut.Cut(text, maxQuoted))
		}
		if _, dup := s.images[id]; dup {
			return nil, fmt.Errorf("line %d: image %s listed twice", line, id)
		}
		s.images[id] = record{first: first, last: last}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if line == 0 {
		return nil, errors.New("empty file")
	}
	return s, nil
}

func splitLine(text string) (id string, first, last int64, ok bool) {
	fields := strings.Fields(text)
	if len(fields) != 3 || fields[0] == "" || strings.ContainsAny(fields[0], "\x00") {
		return "", 0, 0, false
	}
	f, err1 := strconv.ParseInt(fields[1], 10, 64)
	l, err2 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil || f <= 0 || l < 0 {
		return "", 0, 0, false
	}
	return fields[0], f, l, true
}

// Observe records a reading of the node at now: every image in ids is
// seen, those for which used is true are in use. Images no longer on the
// node are forgotten, so the file never outgrows the node; but not those a
// reading at now or later recorded: workers read the node, then wait for
// the lock, so another's newer reading may be merged first, and an image
// it saw arrive after this reading is not gone from the node.
func (s *State) Observe(now time.Time, ids []string, used func(i int) bool) {
	t := now.Unix()
	s.reading++
	for i, id := range ids {
		r, ok := s.images[id]
		if !ok || r.first > t {
			r.first = t
		}
		if used(i) && t > r.last {
			r.last = t
		}
		r.seen = s.reading
		s.images[id] = r
	}
	for id, r := range s.images {
		if r.seen != s.reading && r.first < t && r.last < t {
			delete(s.images, id)
		}
	}
}

// Save writes the state to dir, creating it, atomically: a reader sees the
// old file or the new one, never a part.
func Save(dir string, s *State) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("node state directory: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(s.images) * 96)
	b.WriteString(header)
	b.WriteByte('\n')
	var num []byte
	for id, r := range s.images {
		if strings.ContainsAny(id, " \t\n\r\x00") || id == "" {
			continue // not an ID the runtime gives; never written, so the file stays readable
		}
		b.WriteString(id)
		for _, n := range []int64{r.first, r.last} {
			b.WriteByte(' ')
			num = strconv.AppendInt(num[:0], n, 10)
			b.Write(num)
		}
		b.WriteByte('\n')
	}
	if err := atomicfile.Write(Path(dir), b.Bytes()); err != nil {
		return fmt.Errorf("node state %s: %w", Path(dir), err)
	}
	return nil
}
