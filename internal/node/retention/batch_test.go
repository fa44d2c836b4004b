package retention

import (
	"encoding/binary"
	"testing"
)

func TestFreedRatio(t *testing.T) {
	cases := map[string]struct {
		highest  float64
		measured bool
		want     float64
	}{
		"before any measurement: the first batch's bound": {want: FirstFreedRatio},
		"a measured ratio below the assumed one":          {highest: 0.5, measured: true, want: AssumedFreedRatio},
		"nothing freed yet":                               {highest: 0, measured: true, want: AssumedFreedRatio},
		"a measured ratio above it: compressed layers":    {highest: 3.5, measured: true, want: 3.5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := FreedRatio(tc.highest, tc.measured); got != tc.want {
				t.Errorf("FreedRatio(%v, %v) = %v, want %v", tc.highest, tc.measured, got, tc.want)
			}
		})
	}
}

func TestNextBatch(t *testing.T) {
	tens := []uint64{10, 10, 10, 10, 10, 10, 10, 10}
	cases := map[string]struct {
		sizes []uint64
		need  uint64
		ratio float64
		want  int
	}{
		"far from the target: as many as the estimate needs": {sizes: tens, need: 101, ratio: 2, want: 6},
		"the estimate reached exactly":                       {sizes: tens, need: 40, ratio: 2, want: 2},
		"past by the last image only":                        {sizes: tens, need: 41, ratio: 2, want: 3},
		"near the target: one image":                         {sizes: tens, need: 5, ratio: 2, want: 1},
		"need of one byte: one image":                        {sizes: tens, need: 1, ratio: 4, want: 1},
		"nothing needed: still one":                          {sizes: tens, need: 0, ratio: 2, want: 1},
		"a higher ratio: fewer images":                       {sizes: tens, need: 100, ratio: 4, want: 3},
		"the estimate over the whole queue":                  {sizes: tens, need: 1000, ratio: 2, want: 8},
		"a large image first covers the need alone":          {sizes: []uint64{500, 1, 1}, need: 20, ratio: 2, want: 1},
		"small images before a large one":                    {sizes: []uint64{1, 1, 500, 1}, need: 20, ratio: 2, want: 3},
		"images of no size count nothing":                    {sizes: []uint64{0, 0, 10, 10}, need: 30, ratio: 2, want: 4},
		"empty queue":                                        {sizes: []uint64{}, need: 10, ratio: 2, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NextBatch(tc.sizes, tc.need, tc.ratio); got != tc.want {
				t.Errorf("NextBatch = %d, want %d", got, tc.want)
			}
		})
	}
}

// FuzzNextBatch: whatever the queue, need and ratio, a batch is between one
// image and the queue, every image of it but the last is needed by the
// estimate (the estimate without it stays below need), and it stops short
// of need only when it takes the whole queue.
func FuzzNextBatch(f *testing.F) {
	f.Add([]byte{10, 0, 10, 0, 10, 0}, uint32(25), uint8(20))
	f.Add([]byte{255, 255, 1, 0}, uint32(0), uint8(1))
	f.Add([]byte{}, uint32(5), uint8(40))
	f.Fuzz(func(t *testing.T, data []byte, need uint32, r uint8) {
		var sizes []uint64
		for i := 0; i+2 <= len(data); i += 2 {
			sizes = append(sizes, uint64(binary.LittleEndian.Uint16(data[i:]))<<10)
		}
		ratio := FreedRatio(float64(r)/10, r%2 == 0)
		k := NextBatch(sizes, uint64(need), ratio)
		if len(sizes) == 0 {
			if k != 0 {
				t.Fatalf("%d from an empty queue", k)
			}
			return
		}
		if k < 1 || k > len(sizes) {
			t.Fatalf("batch of %d from a queue of %d", k, len(sizes))
		}
		var est float64
		for _, s := range sizes[:k-1] {
			est += float64(s) * ratio
		}
		if k > 1 && est >= float64(need) {
			t.Fatalf("the batch's first %d images already free %v of %d by the estimate: its last is not needed", k-1, est, need)
		}
		est += float64(sizes[k-1]) * ratio
		if est < float64(need) && k < len(sizes) {
			t.Fatalf("batch of %d estimated at %v stops short of %d with %d more queued", k, est, need, len(sizes)-k)
		}
	})
}
