package remover

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/regret"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestRegretAcrossRuns: a removal is in the ledger once it settled; the
// image back on the node is one return, reported by the next run and by no
// later one; a dry run records nothing.
func TestRegretAcrossRuns(t *testing.T) {
	dir := stateDir(t)
	rt := &fakeRuntime{images: []cri.Image{alpine, nginx}}
	run := func(now time.Time, job string, dryRun bool, entries ...string) (*workerresult.Regret, []Age) {
		t.Helper()
		targets, _ := ParseTargets(entries)
		info := &RunInfo{}
		opts := Options{Now: now, Clock: func() time.Time { return now.Add(time.Second / 2) }, StateDir: dir, Info: info, Run: job, DryRun: dryRun}
		if _, err := Run(context.Background(), rt, targets, opts); err != nil {
			t.Fatal(err)
		}
		if info.StateErr != nil {
			t.Fatal(info.StateErr)
		}
		snap, err := ReadNode(context.Background(), rt, opts.Policy)
		if err != nil {
			t.Fatal(err)
		}
		ages, _, save, err := NodeAges(snap, func() (map[string]time.Time, error) { return nil, nil }, dir, 0, now.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := save(); err != nil {
			t.Fatal(err)
		}
		return info.Regret, ages
	}
	pullBack := func() {
		rt.mu.Lock()
		rt.removed = nil
		rt.mu.Unlock()
	}
	removedAt := t0.Add(time.Second) // the clock's half second, rounded up
	back := Age{Returns: 1, LastReturned: t0.Add(time.Hour)}

	type step struct {
		name    string
		now     time.Time
		before  func()
		dryRun  bool
		entries []string
		want    *workerresult.Regret
		// wantAlpine is alpine's returns and last return after the step.
		wantAlpine Age
	}
	steps := []step{
		{name: "removed", now: t0, entries: []string{"docker.io/library/alpine:3.19"}},
		{name: "pulled back, reported", now: t0.Add(time.Hour), before: pullBack, entries: []string{"example.com/none:1"},
			want: &workerresult.Regret{Returns: 1, BytesReturned: 100, ByPolicy: map[string]workerresult.RegretTotal{"Listed": {Returns: 1, Bytes: 100}},
				Recent: []workerresult.RegretReturn{{Image: alpine.ID, Repository: "docker.io/library/alpine", Bytes: 100, Policy: "Listed", Run: "job-1", RemovedAt: removedAt, ReturnedAt: t0.Add(time.Hour)}}},
			wantAlpine: back},
		{name: "not told twice", now: t0.Add(2 * time.Hour), entries: []string{"example.com/none:1"}, wantAlpine: back},
		{name: "a dry run records nothing", now: t0.Add(3 * time.Hour), dryRun: true, entries: []string{"docker.io/library/alpine:3.19"}, wantAlpine: back},
		{name: "so nothing came back", now: t0.Add(4 * time.Hour), entries: []string{"example.com/none:1"}, wantAlpine: back},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		job := map[time.Time]string{t0: "job-1"}[s.now]
		got, ages := run(s.now, job, s.dryRun, s.entries...)
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: regret (-want +got):\n%s", s.name, diff)
		}
		var a Age
		for i, img := range rt.images {
			if img.ID == alpine.ID && i < len(ages) {
				a = Age{Returns: ages[i].Returns, LastReturned: ages[i].LastReturned}
			}
		}
		if s.name == "removed" {
			continue // alpine is gone: no age
		}
		if diff := cmp.Diff(s.wantAlpine, a); diff != "" {
			t.Errorf("%s: alpine's returns (-want +got):\n%s", s.name, diff)
		}
	}
	l, err := regret.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := l.Get(alpine.ID)
	want := regret.Entry{Repository: "docker.io/library/alpine", Bytes: 100, RemovedAt: removedAt, Policy: "Listed", Run: "job-1", Returns: 1, LastReturnedAt: t0.Add(time.Hour), BytesReturned: 100}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("ledger entry (-want +got):\n%s", diff)
	}
}
