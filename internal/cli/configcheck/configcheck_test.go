package configcheck

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/repo"
)

func repoPath(parts ...string) string { return repo.Path(parts...) }

func TestCheck(t *testing.T) {
	read := func(parts ...string) string {
		data, err := os.ReadFile(repoPath(parts...))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	type result struct {
		Source   string
		Warnings int
		Err      string // a part of the error; "" valid
	}
	cases := map[string]struct {
		file string
		want result
	}{
		"the shipped document": {
			file: read("config", "manager", "controller_manager_config.yaml"),
			want: result{Source: "an EraserConfig document"},
		},
		"the chart's values": {
			file: read("charts", "eraser", "values.yaml"),
			want: result{Source: "Helm values' runtimeConfig"},
		},
		"upstream's values, v1alpha1 by shape": {
			file: read("internal", "wire", "config", "testdata", "upstream", "values-v1alpha1.yaml"),
			want: result{Source: "Helm values' runtimeConfig", Warnings: 4},
		},
		"a typo in values": {
			file: "runtimeConfig:\n  manager:\n    nodeFilter:\n      selector: [a]\n",
			want: result{Source: "Helm values' runtimeConfig", Err: "manager.nodeFilter.selector"},
		},
		"a wrong type in a document": {
			file: "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager:\n  scheduling:\n    repeatInterval: often\n",
			want: result{Source: "an EraserConfig document", Err: "repeatInterval"},
		},
		"a ConfigMap manifest": {
			file: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: eraser-manager-config}\ndata:\n  controller_manager_config.yaml: |\n    apiVersion: eraser.sh/v1alpha3\n    kind: EraserConfig\n",
			want: result{Source: "the ConfigMap's controller_manager_config.yaml"},
		},
		"a ConfigMap without the document": {
			file: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {other: y}\n",
			want: result{Source: "a ConfigMap", Err: "no data.controller_manager_config.yaml"},
		},
		"not YAML": {file: "a: [b", want: result{Source: "a YAML file", Err: "not YAML"}},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		r := Check([]byte(tc.file))
		g := result{Source: r.Source, Warnings: len(r.Warnings)}
		if r.Err != nil {
			g.Err = r.Err.Error()
			if tc.want.Err != "" && strings.Contains(g.Err, tc.want.Err) {
				g.Err = tc.want.Err
			}
		}
		got[name], want[name] = g, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
}

func TestMainExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanagr: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		want int
	}{
		"valid":         {args: []string{"check", "-f", good}, want: ExitOK},
		"one invalid":   {args: []string{"check", "-f", good, "-f", bad}, want: ExitInvalid},
		"missing file":  {args: []string{"check", "-f", filepath.Join(dir, "none")}, want: ExitInvalid},
		"no file":       {args: []string{"check"}, want: ExitUsage},
		"other verb":    {args: []string{"show"}, want: ExitUsage},
		"stdin, valid":  {args: []string{"check", "-f", "-"}, want: ExitOK},
		"stray operand": {args: []string{"check", "-f", good, "extra"}, want: ExitUsage},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			stdin := strings.NewReader("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n")
			if got := Main(tc.args, stdin, &out, &errOut); got != tc.want {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", got, tc.want, out.String(), errOut.String())
			}
		})
	}
	var out bytes.Buffer
	Main([]string{"check", "-f", bad}, nil, &out, &bytes.Buffer{})
	if !strings.Contains(out.String(), "managr") {
		t.Errorf("the refusal does not name the key: %s", out.String())
	}
}
