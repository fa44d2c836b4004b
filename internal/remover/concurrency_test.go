package remover

import "testing"

func TestConcurrencyFor(t *testing.T) {
	cases := map[string]struct {
		limit int64
		want  int
	}{
		"no limit":                  {limit: 0, want: DefaultConcurrency},
		"upstream's 30Mi":           {limit: 30 << 20, want: 896},
		"64Mi":                      {limit: 64 << 20, want: 3072},
		"generous":                  {limit: 1 << 30, want: DefaultConcurrency},
		"below the base still runs": {limit: 10 << 20, want: minConcurrency},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := concurrencyFor(tc.limit); got != tc.want {
				t.Errorf("concurrencyFor(%d) = %d, want %d", tc.limit, got, tc.want)
			}
		})
	}
}
