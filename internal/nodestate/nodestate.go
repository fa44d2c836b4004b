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

// State maps image IDs to what is known of them.
type State struct {
	Images map[string]Entry
	// New is set when there was no file: the node has no history.
	New bool
}

// Path is the state file in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Load reads the state in dir. A missing file is an empty state with New
// set; an unreadable or malformed one is an error naming the file, so that
// a damaged history never passes for a node that used nothing.
func Load(dir string) (*State, error) {
	path := Path(dir)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Images: map[string]Entry{}, New: true}, nil
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

func parse(data []byte) (*State, error) {
	s := &State{Images: map[string]Entry{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 4096)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != header {
				return nil, fmt.Errorf("line 1: want %q, got %q", header, truncate(text))
			}
			continue
		}
		id, first, last, ok := splitLine(text)
		if !ok {
			return nil, fmt.Errorf("line %d: want \"<image ID> <first seen> <last used>\", got %q", line, truncate(text))
		}
		if _, dup := s.Images[id]; dup {
			return nil, fmt.Errorf("line %d: image %s listed twice", line, id)
		}
		s.Images[id] = Entry{FirstSeen: first, LastUsed: last}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if line == 0 {
		return nil, errors.New("empty file")
	}
	return s, nil
}

func splitLine(text string) (id string, first, last time.Time, ok bool) {
	fields := strings.Fields(text)
	if len(fields) != 3 || fields[0] == "" || strings.ContainsAny(fields[0], "\x00") {
		return "", first, last, false
	}
	f, err1 := strconv.ParseInt(fields[1], 10, 64)
	l, err2 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil || f <= 0 || l < 0 {
		return "", first, last, false
	}
	first = time.Unix(f, 0).UTC()
	if l > 0 {
		last = time.Unix(l, 0).UTC()
	}
	return fields[0], first, last, true
}

func truncate(s string) string {
	if len(s) > 100 {
		return s[:97] + "..."
	}
	return s
}

// Observe records a reading of the node at now: every image in ids is
// seen, those for which used is true are in use. Images no longer on the
// node are forgotten, so the file never outgrows the node.
func (s *State) Observe(now time.Time, ids []string, used func(i int) bool) {
	now = now.Truncate(time.Second)
	next := make(map[string]Entry, len(ids))
	for i, id := range ids {
		e, ok := s.Images[id]
		if !ok || e.FirstSeen.After(now) {
			e.FirstSeen = now
		}
		if used(i) && now.After(e.LastUsed) {
			e.LastUsed = now
		}
		next[id] = e
	}
	s.Images = next
}

// Save writes the state to dir, creating it, atomically: a reader sees the
// old file or the new one, never a part.
func Save(dir string, s *State) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("node state directory: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(s.Images) * 96)
	b.WriteString(header)
	b.WriteByte('\n')
	for id, e := range s.Images {
		if strings.ContainsAny(id, " \t\n\r\x00") || id == "" {
			continue // not an ID the runtime gives; never written, so the file stays readable
		}
		var last int64
		if !e.LastUsed.IsZero() {
			last = e.LastUsed.Unix()
		}
		fmt.Fprintf(&b, "%s %d %d\n", id, e.FirstSeen.Unix(), last)
	}
	tmp, err := os.CreateTemp(dir, ".images-*")
	if err != nil {
		return fmt.Errorf("node state: %w", err)
	}
	_, err = tmp.Write(b.Bytes())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), Path(dir))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("node state %s: %w", Path(dir), err)
	}
	return nil
}
