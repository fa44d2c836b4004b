//go:build linux

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// The leftover listings of an interrupted node, and their summaries for a
// failure message.

// stableLeftovers lists the leftovers until two listings in a row agree:
// a restarted runtime cleans some of what it finds (containerd's garbage
// collection, containers/storage's incomplete layers) on its own time.
func stableLeftovers(t *testing.T, endpoint string, args ...string) map[leftoverkind.Kind][]leftover.Leftover {
	t.Helper()
	prev := leftoversOf(t, endpoint, args...)
	deadline := time.Now().Add(time.Minute)
	for {
		time.Sleep(500 * time.Millisecond)
		cur := leftoversOf(t, endpoint, args...)
		if cmp.Equal(keys(prev), keys(cur)) {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leftovers did not settle within a minute: %v, then %v", keys(prev), keys(cur))
		}
		prev = cur
	}
}

func flatten(byKind map[leftoverkind.Kind][]leftover.Leftover) []leftover.Leftover {
	var out []leftover.Leftover
	for _, ls := range byKind {
		out = append(out, ls...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Namespace+out[i].Name < out[j].Namespace+out[j].Name
	})
	return out
}

func keys(byKind map[leftoverkind.Kind][]leftover.Leftover) []string {
	var out []string
	for _, l := range flatten(byKind) {
		out = append(out, fmt.Sprintf("%s %s %s %d", l.Kind, l.Namespace, l.Name, l.Bytes))
	}
	return out
}

func totalBytes(byKind map[leftoverkind.Kind][]leftover.Leftover) uint64 {
	var n uint64
	for _, l := range flatten(byKind) {
		n += l.Bytes
	}
	return n
}

// kindTotals is "kind: count (bytes), ...", or "no leftovers".
func kindTotals(byKind map[leftoverkind.Kind][]leftover.Leftover) string {
	if len(byKind) == 0 {
		return "no leftovers"
	}
	var parts []string
	for kind, ls := range byKind {
		var b uint64
		for _, l := range ls {
			b += l.Bytes
		}
		parts = append(parts, fmt.Sprintf("%s: %d (%s)", kind, len(ls), human(b)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func human(b uint64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
