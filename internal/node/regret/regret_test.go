package regret

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// tempDir avoids t.TempDir, which misbehaves under Wine.
func tempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "regret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// reload saves and loads the ledger, so that every test checks the file too.
func reload(t *testing.T, l *Ledger) *Ledger {
	t.Helper()
	dir := tempDir(t)
	if err := Save(dir, l); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestObserve(t *testing.T) {
	app := Removal{ID: "sha256:app", Repository: "example.com/app", Bytes: 100, Policy: "UnusedFor", Run: "imagejob-a"}
	cases := map[string]struct {
		removed   time.Time // zero: never removed
		prior     *Entry    // the entry before the removal, if any
		readAt    time.Time
		present   []Present
		want      []Return
		wantEntry Entry
	}{
		"not back": {
			removed: at(0), readAt: at(time.Hour),
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(0), Policy: "UnusedFor", Run: "imagejob-a", Pending: true},
		},
		"back, dated by the runtime": {
			removed: at(0), readAt: at(time.Hour), present: []Present{{ID: "sha256:app", Bytes: 100, Arrived: at(10 * time.Minute)}},
			want:      []Return{{ID: "sha256:app", Repository: "example.com/app", Bytes: 100, Policy: "UnusedFor", Run: "imagejob-a", RemovedAt: at(0), ReturnedAt: at(10 * time.Minute)}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(0), Policy: "UnusedFor", Run: "imagejob-a", Returns: 1, LastReturnedAt: at(10 * time.Minute), BytesReturned: 100, Unreported: true},
		},
		"back, the runtime's time is from before the removal": {
			removed: at(0), readAt: at(time.Hour), present: []Present{{ID: "sha256:app", Arrived: at(-time.Hour)}},
			want:      []Return{{ID: "sha256:app", Repository: "example.com/app", Bytes: 100, Policy: "UnusedFor", Run: "imagejob-a", RemovedAt: at(0), ReturnedAt: at(time.Hour)}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(0), Policy: "UnusedFor", Run: "imagejob-a", Returns: 1, LastReturnedAt: at(time.Hour), BytesReturned: 100, Unreported: true},
		},
		"back, the runtime's time is from after the reading": {
			removed: at(0), readAt: at(time.Hour), present: []Present{{ID: "sha256:app", Arrived: at(2 * time.Hour)}},
			want:      []Return{{ID: "sha256:app", Repository: "example.com/app", Bytes: 100, Policy: "UnusedFor", Run: "imagejob-a", RemovedAt: at(0), ReturnedAt: at(time.Hour)}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(0), Policy: "UnusedFor", Run: "imagejob-a", Returns: 1, LastReturnedAt: at(time.Hour), BytesReturned: 100, Unreported: true},
		},
		"a reading from before the removal is no return": {
			removed: at(time.Hour), readAt: at(time.Hour - time.Second), present: []Present{{ID: "sha256:app"}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(time.Hour), Policy: "UnusedFor", Run: "imagejob-a", Pending: true},
		},
		"a reading in the removal's second is no return": {
			removed: at(time.Hour - time.Second/2), readAt: at(time.Hour - time.Second/4), present: []Present{{ID: "sha256:app"}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(time.Hour), Policy: "UnusedFor", Run: "imagejob-a", Pending: true},
		},
		"a reading begun in the second after the removal's is a return": {
			removed: at(time.Hour - time.Second/2), readAt: at(time.Hour + time.Second/4), present: []Present{{ID: "sha256:app"}},
			want:      []Return{{ID: "sha256:app", Repository: "example.com/app", Bytes: 100, Policy: "UnusedFor", Run: "imagejob-a", RemovedAt: at(time.Hour), ReturnedAt: at(time.Hour)}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(time.Hour), Policy: "UnusedFor", Run: "imagejob-a", Returns: 1, LastReturnedAt: at(time.Hour), BytesReturned: 100, Unreported: true},
		},
		"removed again after a return: pending, returns kept": {
			removed: at(5 * time.Hour), readAt: at(6 * time.Hour), present: []Present{{ID: "sha256:app"}},
			prior:     &Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(0), Returns: 1, LastReturnedAt: at(time.Hour), BytesReturned: 100},
			want:      []Return{{ID: "sha256:app", Repository: "example.com/app", Bytes: 100, Policy: "UnusedFor", Run: "imagejob-a", RemovedAt: at(5 * time.Hour), ReturnedAt: at(6 * time.Hour)}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(5 * time.Hour), Policy: "UnusedFor", Run: "imagejob-a", Returns: 2, LastReturnedAt: at(6 * time.Hour), BytesReturned: 200, Unreported: true},
		},
		"already back: counted once": {
			readAt: at(6 * time.Hour), present: []Present{{ID: "sha256:app"}},
			prior:     &Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(0), Policy: "UnusedFor", Run: "imagejob-a", Returns: 1, LastReturnedAt: at(time.Hour), BytesReturned: 100},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 100, RemovedAt: at(0), Policy: "UnusedFor", Run: "imagejob-a", Returns: 1, LastReturnedAt: at(time.Hour), BytesReturned: 100},
		},
		"size unknown at removal: the runtime's now": {
			removed: at(0), readAt: at(time.Hour), present: []Present{{ID: "sha256:app", Bytes: 70}},
			prior: &Entry{},
			want:  []Return{{ID: "sha256:app", Repository: "example.com/app", Bytes: 70, Policy: "UnusedFor", Run: "imagejob-a", RemovedAt: at(0), ReturnedAt: at(time.Hour)}},
			wantEntry: Entry{Repository: "example.com/app", Bytes: 70, RemovedAt: at(0), Policy: "UnusedFor", Run: "imagejob-a", Returns: 1, LastReturnedAt: at(time.Hour),
				BytesReturned: 70, Unreported: true},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := New()
			if c.prior != nil {
				l.entries[app.ID] = *c.prior
			}
			if !c.removed.IsZero() {
				r := app
				if c.prior != nil && *c.prior == (Entry{}) {
					r.Bytes = 0
				}
				l.Record(c.removed, []Removal{r})
			}
			l = reload(t, l)
			got := l.Observe(c.readAt, append(c.present, Present{ID: "sha256:never-removed"}))
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("returns (-want +got):\n%s", diff)
			}
			l = reload(t, l)
			e, _ := l.Get(app.ID)
			if diff := cmp.Diff(c.wantEntry, e); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
			if _, ok := l.Get("sha256:never-removed"); ok {
				t.Error("an image never removed has an entry")
			}
		})
	}
}

// TestReturnCountedOnceAcrossWorkers: the collector counts a return, the
// remover reports it, a later run neither counts nor reports it again.
func TestReturnCountedOnceAcrossWorkers(t *testing.T) {
	dir := tempDir(t)
	l := New()
	l.Record(at(0), []Removal{{ID: "sha256:a", Repository: "r/a", Bytes: 10, Policy: "Unused", Run: "j1"}, {ID: "sha256:b", Repository: "r/b", Bytes: 20, Policy: "DiskPressure", Run: "j1"}})
	step := func(readAt time.Time, present []string, take bool) (found, told []Return) {
		t.Helper()
		l, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		var p []Present
		for _, id := range present {
			p = append(p, Present{ID: id})
		}
		found = l.Observe(readAt, p)
		if take {
			told = l.TakeUnreported()
		}
		if err := Save(dir, l); err != nil {
			t.Fatal(err)
		}
		return found, told
	}
	if err := Save(dir, l); err != nil {
		t.Fatal(err)
	}
	ret := Return{ID: "sha256:a", Repository: "r/a", Bytes: 10, Policy: "Unused", Run: "j1", RemovedAt: at(0), ReturnedAt: at(time.Hour)}
	type got struct{ Found, Told []Return }
	steps := map[string]struct {
		readAt  time.Time
		present []string
		take    bool
		want    got
	}{
		"1 collector": {readAt: at(time.Hour), present: []string{"sha256:a"}, want: got{Found: []Return{ret}}},
		"2 remover":   {readAt: at(time.Hour + time.Minute), present: []string{"sha256:a"}, take: true, want: got{Told: []Return{ret}}},
		"3 next run":  {readAt: at(2 * time.Hour), present: []string{"sha256:a"}, take: true, want: got{}},
	}
	for _, name := range []string{"1 collector", "2 remover", "3 next run"} {
		s := steps[name]
		f, told := step(s.readAt, s.present, s.take)
		if diff := cmp.Diff(s.want, got{f, told}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	l, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n, last := l.Returns("sha256:a"); n != 1 || !last.Equal(at(time.Hour)) {
		t.Errorf("Returns(a) = %d, %v; want 1, %v", n, last, at(time.Hour))
	}
	if n, last := l.Returns("sha256:b"); n != 0 || !last.IsZero() {
		t.Errorf("Returns(b) = %d, %v; want 0, zero", n, last)
	}
}

func TestBound(t *testing.T) {
	now := at(MaxAge + time.Hour)
	cases := map[string]struct {
		entries map[string]Entry
		extra   int // entries added, removed at now - i seconds
		want    []string
	}{
		"older than MaxAge goes": {
			entries: map[string]Entry{
				"sha256:old":           {RemovedAt: at(0)},
				"sha256:returned-late": {RemovedAt: at(0), Returns: 1, LastReturnedAt: at(2 * time.Hour)},
				"sha256:new":           {RemovedAt: at(MaxAge)},
			},
			want: []string{"sha256:new", "sha256:returned-late"},
		},
		"over MaxEntries: oldest first": {
			entries: map[string]Entry{"sha256:oldest": {RemovedAt: at(MaxAge / 2)}},
			extra:   MaxEntries,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := New()
			for id, e := range c.entries {
				l.entries[id] = e
			}
			for i := range c.extra {
				l.entries[fmt.Sprintf("sha256:%08d", i)] = Entry{RemovedAt: now.Add(-time.Duration(i) * time.Second)}
			}
			l.Bound(now)
			if c.extra > 0 {
				if _, ok := l.Get("sha256:oldest"); ok || l.Len() != MaxEntries {
					t.Errorf("kept %d entries, oldest kept: %v", l.Len(), ok)
				}
				return
			}
			var got []string
			for id := range l.entries {
				got = append(got, id)
			}
			if diff := cmp.Diff(c.want, got, cmpSorted); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

var cmpSorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })

func TestLoadRefusesDamage(t *testing.T) {
	ok := "sha256:a r/a 10 100 Unused j1 0 0 0 p"
	cases := map[string]string{
		"empty":                 "",
		"no header":             ok + "\n",
		"other version":         "eraser-regret-ledger 2\n",
		"missing field":         header + "\nsha256:a r/a 10 100 Unused j1 0 0 0\n",
		"double space":          header + "\nsha256:a  r/a 10 100 Unused j1 0 0 0 p\n",
		"not a number":          header + "\nsha256:a r/a x 100 Unused j1 0 0 0 p\n",
		"negative":              header + "\nsha256:a r/a -1 100 Unused j1 0 0 0 p\n",
		"no removal time":       header + "\nsha256:a r/a 10 0 Unused j1 0 0 0 p\n",
		"returns without time":  header + "\nsha256:a r/a 10 100 Unused j1 1 0 10 -\n",
		"unknown flag":          header + "\nsha256:a r/a 10 100 Unused j1 0 0 0 x\n",
		"unreported, no return": header + "\nsha256:a r/a 10 100 Unused j1 0 0 0 u\n",
		"duplicate":             header + "\n" + ok + "\n" + ok + "\n",
		"over long line":        header + "\n" + strings.Repeat("x", 2000) + " 1 0\n",
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			if err := os.WriteFile(Path(dir), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), Path(dir)) {
				t.Fatalf("Load: got %v, want an error naming the file", err)
			}
			if name != "empty" && !strings.Contains(err.Error(), "line ") {
				t.Errorf("Load: %v does not name the line", err)
			}
		})
	}
	dir := tempDir(t)
	if err := os.WriteFile(Path(dir), []byte(header+"\n"+ok+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := Load(dir); err != nil || l.Len() != 1 || l.New {
		t.Fatalf("Load of a good file: %v", err)
	}
}

func TestSaveWritesOnlyWhatParses(t *testing.T) {
	dir := filepath.Join(tempDir(t), "new", "dir")
	l := New()
	l.Record(at(0), []Removal{
		{ID: "sha256:a", Repository: "has space", Policy: "-", Run: "j\n1", Bytes: 1},
		{ID: "bad id", Bytes: 2},
		{ID: "-", Bytes: 3},
	})
	if err := Save(dir, l); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != FileName {
		t.Fatalf("directory holds %v (%v), want only %s", entries, err, FileName)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := got.Get("sha256:a")
	if diff := cmp.Diff(Entry{Bytes: 1, RemovedAt: at(0), Pending: true}, e); diff != "" || got.Len() != 1 {
		t.Errorf("reloaded %d entries (-want +got):\n%s", got.Len(), diff)
	}
}

func TestRepository(t *testing.T) {
	cases := map[string]struct {
		tags, digests []string
		want          string
	}{
		"tag":             {tags: []string{"docker.io/library/nginx:1.27"}, want: "docker.io/library/nginx"},
		"registry port":   {tags: []string{"localhost:5000/app:v1"}, want: "localhost:5000/app"},
		"port, no tag":    {tags: []string{"localhost:5000/app"}, want: "localhost:5000/app"},
		"digest only":     {digests: []string{"localhost:5000/app@sha256:abc"}, want: "localhost:5000/app"},
		"nothing":         {want: ""},
		"tag with digest": {tags: []string{"r/app:v1@sha256:abc"}, want: "r/app"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Repository(c.tags, c.digests); got != c.want {
				t.Errorf("Repository = %q, want %q", got, c.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(header + "\nsha256:a r/a 10 100 Unused j1 0 0 0 p\n"))
	f.Add([]byte(header + "\nsha256:a - 10 100 - - 2 300 20 u\nsha256:b r 1 5 Listed - 0 0 0 -"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parse(data)
		if err != nil {
			return
		}
		// What parses saves and parses again to the same ledger.
		dir := tempDir(t)
		if err := Save(dir, l); err != nil {
			t.Fatal(err)
		}
		again, err := Load(dir)
		if err != nil {
			t.Fatalf("a parsed ledger saved unreadable: %v", err)
		}
		if diff := cmp.Diff(l.entries, again.entries); diff != "" {
			t.Fatalf("save and load changed the ledger (-parsed +reloaded):\n%s", diff)
		}
	})
}
