package remover

import "testing"

func TestConcurrencyFor(t *testing.T) {
	cases := map[string]struct {
		limit int64
		live  uint64
		want  int
	}{
		"no limit":                          {limit: 0, want: DefaultConcurrency},
		"upstream's 30Mi, a small node":     {limit: 30 << 20, live: 4 << 20, want: 832},
		"upstream's 30Mi, 20,000 images":    {limit: 30 << 20, live: 14 << 20, want: 64},
		"64Mi, a small node":                {limit: 64 << 20, live: 4 << 20, want: 3008},
		"generous":                          {limit: 1 << 30, live: 4 << 20, want: DefaultConcurrency},
		"below what the run holds, it runs": {limit: 10 << 20, live: 8 << 20, want: minConcurrency},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := concurrencyFor(tc.limit, tc.live); got != tc.want {
				t.Errorf("concurrencyFor(%d, %d) = %d, want %d", tc.limit, tc.live, got, tc.want)
			}
		})
	}
}
