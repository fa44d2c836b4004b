package retention

import (
	"encoding/binary"
	"testing"
	"time"
)

// FuzzChoose: whatever the candidates, settings and disk, no image is
// chosen by a policy the run does not apply (the minimum age is a keep
// rule the remover applies first, see its TestNoYoungImagePlannedAutomatically); the disk policy chooses nothing below
// the high threshold; every candidate gets exactly one decision.
func FuzzChoose(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, uint8(85), uint8(80), true, false)
	f.Add([]byte{200, 0, 0, 0, 1, 1, 1, 1, 9, 9, 9, 9}, uint8(0), uint8(0), false, true)
	f.Fuzz(func(t *testing.T, data []byte, high, low uint8, scheduled, sweep bool) {
		s := Settings{MinAge: 10 * time.Minute, UnusedFor: 30 * 24 * time.Hour}
		if high > 0 && low > 0 && low < high && high <= 100 {
			s.HighThresholdPercent, s.LowThresholdPercent = int(high), int(low)
		}
		var cands []Candidate
		for i := 0; i+6 <= len(data) && len(cands) < 64; i += 6 {
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
			if (d.Policy == UnusedFor || d.Policy == DiskPressure) && !scheduled {
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
