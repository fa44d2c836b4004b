package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLayerOf(t *testing.T) {
	cases := map[string]Layer{
		"fmt":                                      Outside,
		"github.com/eraser-oss/eraserx/foo":        Outside,
		module + "/api/v1":                         API,
		module + "/internal/util/bytesize":         Util,
		module + "/internal/wire/config":           Wire,
		module + "/pkg/scanner":                    Pkg,
		module + "/internal/node/remover":          Node,
		module + "/internal/manager":               Manager,
		module + "/internal/manager/wave":          Manager,
		module + "/internal/cli/plugin":            CLI,
		module + "/internal/testing/testenv":       Testing,
		module + "/scanner/trivy/internal/app":     Scanner,
		module + "/scanner/trivy/test/e2e":         Top,
		module + "/scanner/trivy/internal/fixture": Testing,
		module + "/internal/process/version":       Stamp,
		module + "/internal/process/logging":       Process,
		module + "/cmd/manager":                    Top,
		module + "/test/fault":                     Top,
		module + "/test/bench/regret":              Top,
	}
	for path, want := range cases {
		if got := LayerOf(path); got != want {
			t.Errorf("LayerOf(%q) = %s, want %s", path, got, want)
		}
	}
}

// TestCheck: each wrong-way import is reported once, in product code and in
// tests, and a side's test that reaches the other side through test support
// is reported too.
func TestCheck(t *testing.T) {
	const (
		remover  = module + "/internal/node/remover"
		scan     = module + "/internal/node/scan"
		imagejob = module + "/internal/manager/imagejob"
		podspec  = module + "/internal/manager/podspec"
		plugin   = module + "/internal/cli/plugin"
		config   = module + "/internal/wire/config"
		bytesize = module + "/internal/util/bytesize"
		builder  = module + "/internal/testing/builder"
		workers  = module + "/internal/testing/workertest"
		fault    = module + "/test/fault"
	)
	cases := map[string]struct {
		pkgs []Package
		want []string
	}{
		"layers pointing one way": {
			pkgs: []Package{
				{ImportPath: remover, Imports: []string{"fmt", config, bytesize, scan}},
				{ImportPath: imagejob, Imports: []string{config, podspec}, TestImports: []string{builder}},
				{ImportPath: plugin, Imports: []string{imagejob, remover}},
				{ImportPath: builder, Imports: []string{podspec}, Deps: []string{podspec, config}},
				{ImportPath: fault, XTestImports: []string{imagejob, remover, plugin, workers}},
			},
		},
		"manager importing the node side": {
			pkgs: []Package{{ImportPath: imagejob, Imports: []string{scan}}},
			want: []string{imagejob + " imports " + scan + " (internal/manager may not import internal/node)"},
		},
		"node importing a front end": {
			pkgs: []Package{{ImportPath: remover, Imports: []string{plugin}}},
			want: []string{remover + " imports " + plugin + " (internal/node may not import internal/cli)"},
		},
		"a format importing a side": {
			pkgs: []Package{{ImportPath: config, Imports: []string{scan}}},
			want: []string{config + " imports " + scan + " (internal/wire may not import internal/node)"},
		},
		"a helper importing a format": {
			pkgs: []Package{{ImportPath: bytesize, Imports: []string{config}}},
			want: []string{bytesize + " imports " + config + " (internal/util may not import internal/wire)"},
		},
		"a manager test importing the node side": {
			pkgs: []Package{{ImportPath: imagejob, TestImports: []string{scan}, XTestImports: []string{scan}}},
			want: []string{imagejob + "'s tests import " + scan + " (internal/manager may not import internal/node)"},
		},
		"a manager test reaching the node side through test support": {
			pkgs: []Package{
				{ImportPath: imagejob, TestImports: []string{workers}},
				{ImportPath: workers, Imports: []string{remover}, Deps: []string{"fmt", remover, config}},
			},
			want: []string{imagejob + "'s tests import " + workers + ", which needs " + remover + " (internal/manager may not import internal/node)"},
		},
		"test support importing a front end": {
			pkgs: []Package{{ImportPath: workers, Imports: []string{plugin}}},
			want: []string{workers + " imports " + plugin + " (internal/testing may not import internal/cli)"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Check(c.pkgs)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
