package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheck(t *testing.T) {
	page := "| package | what |\n|---|---|\n| `internal/node/` | node |\n| `internal/node/cri/` | CRI |\n| `internal/wire/gone/` | old |\n"
	tests := map[string]struct {
		pkgs map[string]bool
		want []string
	}{
		"a folder of packages may be listed": {
			pkgs: map[string]bool{"internal/node/cri/": true, "internal/wire/gone/": true},
		},
		"listed and present": {
			pkgs: map[string]bool{"internal/node/cri/": true, "internal/wire/gone/": true},
		},
		"a package missing from the map, a row without a package": {
			pkgs: map[string]bool{"internal/node/cri/": true, "internal/node/new/": true},
			want: []string{
				"docs/dev/packages.md does not list internal/node/new/",
				"docs/dev/packages.md lists internal/wire/gone/, which holds no Go package",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, check(page, tc.pkgs)); diff != "" {
				t.Errorf("check (-want +got):\n%s", diff)
			}
		})
	}
}
