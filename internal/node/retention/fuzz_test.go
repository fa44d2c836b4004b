package retention

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// FuzzChoose: whatever the candidates, settings and disk, no image is
// chosen by a policy the run does not apply (the minimum age is a keep
// rule the remover applies first, see its TestNoYoungImagePlannedAutomatically); the disk policy chooses nothing below
// the high threshold; every candidate gets exactly one decision; no
// automatic policy takes a candidate within its cool-down; Superseded takes
// only what has keepVersions newer; the automatic choices come after the
// others, best score first.
func FuzzChoose(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, uint8(85), uint8(80), true, false, uint8(0), uint8(0))
	f.Add([]byte{200, 0, 0, 0, 1, 1, 1, 1, 9, 9, 9, 9}, uint8(0), uint8(0), false, true, uint8(1), uint8(1))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, uint8(0), uint8(0), true, false, uint8(2), uint8(24))
	f.Fuzz(func(t *testing.T, data []byte, high, low uint8, scheduled, sweep bool, keep, coolHours uint8) {
		s := Settings{MinAge: 10 * time.Minute, UnusedFor: 30 * 24 * time.Hour, KeepVersions: int(keep % 5), CoolDown: time.Duration(coolHours) * time.Hour}
		if high > 0 && low > 0 && low < high && high <= 100 {
			s.HighThresholdPercent, s.LowThresholdPercent = int(high), int(low)
		}
		var cands []Candidate
		for i := 0; i+8 <= len(data) && len(cands) < 64; i += 8 {
			c := Candidate{
				Index:      len(cands),
				Size:       uint64(binary.LittleEndian.Uint16(data[i:])),
				Arrived:    now.Add(-time.Duration(data[i+2]) * time.Hour),
				Listed:     data[i+4]&1 != 0,
				Vulnerable: data[i+4]&2 != 0,
			}
			if data[i+3] > 0 {
				c.LastUsed = now.Add(-time.Duration(data[i+3]) * 24 * time.Hour)
			}
			if data[i+5] > 0 {
				c.FirstSeen = now.Add(-time.Duration(data[i+5]) * 24 * time.Hour)
			}
			c.Newer, c.OwnBytes = int(data[i+6]%8), uint64(data[i+6])
			if r := int(data[i+7] % 4); r > 0 {
				c.Returns, c.LastReturned = r, now.Add(-time.Duration(data[i+7])*time.Hour)
				c.Repository = "r"
			}
			cands = append(cands, c)
		}
		var disk *Disk
		if len(data) >= 2 {
			d := Disk{Capacity: 1000, Available: uint64(data[len(data)-1]) * 4}
			disk = &d
		}
		in := Input{Now: now, Settings: s, Scheduled: scheduled, Sweep: sweep, Disk: disk}
		got := Choose(in, cands)
		if len(got) != len(cands) {
			t.Fatalf("%d decisions for %d candidates", len(got), len(cands))
		}
		seen := map[int]bool{}
		auto := false
		var last float64
		for _, d := range got {
			c := cands[d.Index]
			switch d.Policy {
			case Unused, UnusedFor, Superseded:
				sc := Score(now, c)
				if auto && sc > last {
					t.Fatalf("automatic choices out of score order: %v after %v", sc, last)
				}
				auto, last = true, sc
			case DiskPressure:
			default:
				// The disk policy's kept candidates follow; nothing chosen.
				if auto && d.Policy != "" {
					t.Fatalf("%+v after the automatic choices", d)
				}
			}
			if d.Policy != "" && d.Policy != Listed && now.Before(c.coolingUntil(s)) {
				t.Fatalf("%s took %+v within its cool-down", d.Policy, c)
			}
			if d.Policy == Superseded && (!scheduled || s.KeepVersions == 0 || c.Newer < s.KeepVersions) {
				t.Fatalf("Superseded took %+v (keep %d, scheduled %v)", c, s.KeepVersions, scheduled)
			}
			if d.Kept == workerresult.CoolingDown && now.Compare(c.coolingUntil(s)) >= 0 {
				t.Fatalf("%+v kept cooling down out of its hold", c)
			}
		}
		for _, d := range got {
			if seen[d.Index] {
				t.Fatalf("candidate %d decided twice", d.Index)
			}
			seen[d.Index] = true
			c := cands[d.Index]
			switch d.Policy {
			case "":
			case Listed:
				if !c.Listed {
					t.Fatalf("unlisted %+v chosen as listed", c)
				}
			}
			if (d.Policy == UnusedFor || d.Policy == DiskPressure || d.Policy == Superseded) && !scheduled {
				t.Fatalf("%s applied outside a scheduled run", d.Policy)
			}
			if d.Policy == UnusedFor && now.Sub(c.Idle()) < s.UnusedFor {
				t.Fatalf("%+v used within unusedFor chosen by it", c)
			}
			if d.Policy == DiskPressure && (disk == nil || disk.Percent() < float64(s.HighThresholdPercent)) {
				t.Fatalf("disk policy chose %+v below the high threshold", c)
			}
			if d.Policy == Unused && !sweep {
				t.Fatal("Unused chosen without a sweep")
			}
		}
	})
}

// FuzzStandings: whatever the versions, each image with one stands in a
// repository it is in, and in each repository exactly one version is the
// newest (Newer 0) and the Newer counts are distinct.
func FuzzStandings(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 1, 1, 2, 3, 2, 0, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		repos := []string{"a", "b", "c"}
		tags := []string{"", "1", "1.10", "1.9", "latest", "v2"}
		var vs []Version
		for i := 0; i+4 <= len(data) && len(vs) < 64; i += 4 {
			img := int(data[i] % 16)
			vs = append(vs, Version{Image: img, ID: string(rune('A' + img)), Repository: repos[data[i+1]%3],
				Tag: tags[int(data[i+2])%len(tags)], Arrived: now.Add(-time.Duration(data[i+3]%4) * time.Hour)})
		}
		got := Standings(16, vs)
		in := map[int]map[string]bool{}
		for _, v := range vs {
			if in[v.Image] == nil {
				in[v.Image] = map[string]bool{}
			}
			in[v.Image][v.Repository] = true
		}
		for img, st := range got {
			if len(in[img]) == 0 {
				if st != (Standing{}) {
					t.Fatalf("image %d in no repository stands %+v", img, st)
				}
				continue
			}
			if !in[img][st.Repository] {
				t.Fatalf("image %d stands in %q, which it is not in", img, st.Repository)
			}
		}
		for _, repo := range repos {
			// Versions of repo are ranked 0..k-1 once each, when each image's
			// standing is its rank there; an image newer elsewhere has a lower one.
			members := 0
			for img := range in {
				if in[img][repo] {
					members++
				}
			}
			for img := range in {
				if in[img][repo] && got[img].Newer >= members {
					t.Fatalf("image %d: %d newer in %q of %d versions", img, got[img].Newer, repo, members)
				}
			}
		}
	})
}
