package remover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/regret"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/references"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestKeepVersions: keepVersions 2 over five versions of a repository, the
// third newest referenced by a workload: the two newest and the referenced
// one stay; the referenced one counts among the newest, so the two oldest
// go. A version known by its digest alone (its tag moved on) is a version;
// an image in another repository is ranked there; an image in use counts.
func TestKeepVersions(t *testing.T) {
	app := func(n int, tag bool) cri.Image {
		img := cri.Image{ID: fmt.Sprintf("sha256:%064x", n), Size: 10,
			Digests: []string{fmt.Sprintf("registry.example/team/app@sha256:%064x", 100+n)}}
		if tag {
			img.Tags = []string{fmt.Sprintf("registry.example/team/app:1.%d", n)}
		}
		return img
	}
	v1, v2, v3, v4, v5 := app(1, false), app(2, true), app(3, true), app(4, true), app(5, true)
	// The mirror's copy of v2 is the newest there: it stays, wherever v2
	// stands in registry.example/team/app.
	mirrored := v2
	mirrored.Tags = append([]string{"mirror.example/app:1.2"}, v2.Tags...)
	other := cri.Image{ID: fmt.Sprintf("sha256:%064x", 9), Tags: []string{"registry.example/team/db:1"}, Size: 10,
		Digests: []string{fmt.Sprintf("registry.example/team/db@sha256:%064x", 109)}}
	times := map[string]time.Time{}
	for n, img := range []cri.Image{v1, v2, v3, v4, v5, other} {
		times[img.ID] = t0.Add(-time.Duration(10-n) * 24 * time.Hour)
	}
	cases := map[string]struct {
		images []cri.Image
		keep   int
		want   map[string]workerresult.Outcome
	}{
		"two newest and the referenced one": {
			images: []cri.Image{v1, v2, v3, v4, v5, other}, keep: 2,
			want: map[string]workerresult.Outcome{v1.ID: workerresult.Removed, v2.ID: workerresult.Removed, v3.ID: workerresult.Referenced,
				v4.ID: workerresult.NotNeeded, v5.ID: workerresult.NotNeeded, other.ID: workerresult.NotNeeded},
		},
		"in another repository too: superseded only when superseded in each": {
			images: []cri.Image{v1, mirrored, v3, v4, v5, other}, keep: 2,
			want: map[string]workerresult.Outcome{v1.ID: workerresult.Removed, v2.ID: workerresult.NotNeeded, v3.ID: workerresult.Referenced,
				v4.ID: workerresult.NotNeeded, v5.ID: workerresult.NotNeeded, other.ID: workerresult.NotNeeded},
		},
		"keep one": {
			images: []cri.Image{v1, v2, v3, v4, v5, other}, keep: 1,
			want: map[string]workerresult.Outcome{v1.ID: workerresult.Removed, v2.ID: workerresult.Removed, v3.ID: workerresult.Referenced,
				v4.ID: workerresult.Removed, v5.ID: workerresult.NotNeeded, other.ID: workerresult.NotNeeded},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := timedRuntime{fakeRuntime: &fakeRuntime{images: tc.images}, times: times}
			snap := NewSnapshot(tc.images, nil, protect.Policy{})
			snap.Refer(references.Ref{Image: v3.Tags[0], Owner: "Deployment team/app"}, false)
			ages, _, save, err := NodeAges(snap, StartImageTimes(context.Background(), rt, ""), "", 0, t0)
			if err != nil {
				t.Fatal(err)
			}
			_ = save()
			r := Retention{Settings: retention.Settings{KeepVersions: tc.keep}, Now: t0, Ages: ages, Cluster: protect.Cluster{Read: true}}
			remove, results, _ := Plan(snap, Targets{Scheduled: true, Collected: ids(tc.images)}, r)
			got := map[string]workerresult.Outcome{}
			for _, rm := range remove {
				if rm.Policy != retention.Superseded {
					t.Errorf("%s chosen by %s", snap.Images[rm.Image].ID, rm.Policy)
				}
				got[snap.Images[rm.Image].ID] = workerresult.Removed
			}
			for _, res := range results {
				got[res.ImageID] = res.Outcome
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCoolingDown: an image the node's removal ledger says came back is
// kept by a scheduled run (and by "*") as cooling down until its hold ends;
// an ImageList that names it removes it.
func TestCoolingDown(t *testing.T) {
	rt := timedRuntime{
		fakeRuntime: &fakeRuntime{images: []cri.Image{alpine, nginx, redis}},
		times:       map[string]time.Time{alpine.ID: t0.Add(-72 * time.Hour), nginx.ID: t0.Add(-36 * time.Hour), redis.ID: t0.Add(-72 * time.Hour)},
	}
	// nginx was removed twice and came back twice, last 36 hours ago: held
	// 48 hours from then.
	dir := stateDir(t)
	l := regret.New()
	for _, back := range []time.Duration{100 * time.Hour, 36 * time.Hour} {
		l.Record(t0.Add(-back-time.Hour), []regret.Removal{{ID: nginx.ID, Bytes: nginx.Size, Policy: "UnusedFor"}})
		l.Observe(t0.Add(-back), []regret.Present{{ID: nginx.ID}})
	}
	if n, last := l.Returns(nginx.ID); n != 2 || !last.Equal(t0.Add(-36*time.Hour)) {
		t.Fatalf("the ledger's returns: %d, last %v", n, last)
	}
	if err := regret.Save(dir, l); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, targets Targets, now time.Time) map[string]Result {
		results, err := Run(context.Background(), rt, targets, Options{
			Retention: retention.Settings{CoolDown: 24 * time.Hour}, Now: now, DryRun: true, StateDir: dir,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]Result{}
		for _, r := range results {
			got[r.ImageID] = r
		}
		return got
	}
	scheduled := Targets{Scheduled: true, Collected: ids(rt.images)}
	got := run(t, scheduled, t0)
	if r := got[nginx.ID]; r.Outcome != workerresult.CoolingDown || r.Detail != "came back 2 times after a removal, last 36h0m0s ago; held until 2026-11-01T12:00:00Z" {
		t.Errorf("scheduled run: nginx %q, %q", r.Outcome, r.Detail)
	}
	if got[alpine.ID].Outcome != workerresult.Removed || got[redis.ID].Outcome != workerresult.Removed {
		t.Errorf("scheduled run: %+v", got)
	}
	all, _ := ParseTargets([]string{"*"})
	if r := run(t, all, t0)[nginx.ID]; r.Outcome != workerresult.CoolingDown {
		t.Errorf(`"*": nginx %q`, r.Outcome)
	}
	if r := run(t, scheduled, t0.Add(13*time.Hour))[nginx.ID]; r.Outcome != workerresult.Removed {
		t.Errorf("after its hold: nginx %q, %q", r.Outcome, r.Detail)
	}
	if r := run(t, mustTargets(t, nginx.Tags[0]), t0)[nginx.ID]; r.Outcome != workerresult.Removed || r.Policy != retention.Listed {
		t.Errorf("named: nginx %q by %q", r.Outcome, r.Policy)
	}
}
