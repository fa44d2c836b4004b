package registrycheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/util/atomicfile"
)

// CacheFile is the cache's file name in the node's state directory.
const CacheFile = "registry-answers"

// cacheHeader is the file's first line; a file with another is read as
// empty (a later version's layout is not guessed at).
const cacheHeader = "eraser registry answers v1"

// Cache bounds: the answers kept, and how long each answer stands. A
// present answer may turn gone when a registry prunes, so it stands an
// hour; a gone one rarely comes back, so it stands a day.
const (
	DefaultMaxCached  = 4096
	DefaultPresentTTL = time.Hour
	DefaultGoneTTL    = 24 * time.Hour
)

// cached is one remembered answer.
type cached struct {
	answer  Answer
	expires time.Time
}

// cache is the node's remembered answers, by content.
type cache struct {
	entries map[string]cached
	dirty   bool
}

// loadCache reads the cache file; a missing, unreadable or foreign file is
// an empty cache (the answers are asked again), with the error for the log
// when it was not simply missing.
func loadCache(path string, now time.Time) (*cache, error) {
	c := &cache{entries: map[string]cached{}}
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	c.entries, err = parseCache(data, now)
	return c, err
}

// parseCache reads the file's lines: "<answer> <expiry unix seconds>
// <content>". Expired answers and lines that do not parse are dropped.
func parseCache(data []byte, now time.Time) (map[string]cached, error) {
	out := map[string]cached{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 64*1024)
	if !sc.Scan() || sc.Text() != cacheHeader {
		return out, fmt.Errorf("not a registry answers file of this version")
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		a := Answer(f[0])
		if a != Present && a != Gone {
			continue
		}
		sec, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		exp := time.Unix(sec, 0)
		if !exp.After(now) {
			continue
		}
		if len(out) >= DefaultMaxCached {
			break
		}
		out[f[2]] = cached{answer: a, expires: exp}
	}
	return out, sc.Err()
}

func (c *cache) get(key string, now time.Time) (Answer, bool) {
	e, ok := c.entries[key]
	if !ok || !e.expires.After(now) {
		return "", false
	}
	return e.answer, true
}

func (c *cache) put(key string, a Answer, ttl time.Duration, now time.Time) {
	if ttl <= 0 || (a != Present && a != Gone) || strings.ContainsAny(key, " \t\n") {
		return
	}
	c.entries[key] = cached{answer: a, expires: now.Add(ttl)}
	c.dirty = true
}

// encode is the file's content: the answers still standing, at most max,
// those that stand longest kept.
func (c *cache) encode(now time.Time, max int) []byte {
	keys := make([]string, 0, len(c.entries))
	for k, e := range c.entries {
		if e.expires.After(now) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := c.entries[b].expires.Compare(c.entries[a].expires); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	if len(keys) > max {
		keys = keys[:max]
	}
	var b bytes.Buffer
	b.WriteString(cacheHeader + "\n")
	for _, k := range keys {
		e := c.entries[k]
		fmt.Fprintf(&b, "%s %d %s\n", e.answer, e.expires.Unix(), k)
	}
	return b.Bytes()
}

// save writes the cache, replacing the file whole (a crash leaves the old
// one or the new one).
func (c *cache) save(path string, now time.Time) error {
	if path == "" || !c.dirty {
		return nil
	}
	if err := atomicfile.Write(path, c.encode(now, DefaultMaxCached)); err != nil {
		return err
	}
	c.dirty = false
	return nil
}
