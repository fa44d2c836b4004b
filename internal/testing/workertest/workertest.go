// Package workertest runs the node worker binaries as processes, the way a
// worker pod runs them, for the end-to-end tests of this module and of the
// scanner's module.
package workertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Run is how one worker process ended.
type Run struct {
	Code    int
	Stderr  string
	Summary workerresult.Summary
}

// Worker runs the binary with args and --summary-file, and reads the
// summary it left. The collector and the remover also get, unless args set
// them, a node state directory of the test's own (never the host's) and no
// minimum age, since the images tests import are seconds old; tests of the
// retention policy pass --min-age and a pinned --now themselves. Workers of one pod run side by side, so it may be called
// from any goroutine: a failure is reported with t.Errorf, not t.Fatal.
func Worker(t *testing.T, ctx context.Context, binary string, args ...string) Run {
	t.Helper()
	return run(t, ctx, nil, binary, args...)
}

// WorkerAs is Worker with the worker holding what a worker pod's container
// holds: root, the capabilities named (as the pod spec adds them, e.g.
// "DAC_OVERRIDE") and no others, no new privileges.
func WorkerAs(t *testing.T, ctx context.Context, capabilities []string, binary string, args ...string) Run {
	t.Helper()
	return run(t, ctx, AsContainer(capabilities), binary, args...)
}

// AsContainer is the command prefix (setpriv) that runs a program as a
// worker pod's container holds it: root, the capabilities named and no
// others, no new privileges.
func AsContainer(capabilities []string) []string {
	set := "-all"
	for _, c := range capabilities {
		set += ",+" + strings.ToLower(c)
	}
	return []string{"setpriv", "--bounding-set=" + set, "--inh-caps=-all", "--no-new-privs", "--"}
}

func run(t *testing.T, ctx context.Context, wrap []string, binary string, args ...string) Run {
	t.Helper()
	name := filepath.Base(binary)
	summaryFile := filepath.Join(t.TempDir(), "termination-log")
	if name == "collector" || name == "remover" {
		args = WithDefaults(args, "--state-dir="+t.TempDir(), "--min-age=0s")
	}
	argv := append(append(append([]string{}, wrap...), binary), append(args, "--summary-file="+summaryFile)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := Run{Stderr: stderr.String()}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		r.Code = exitErr.ExitCode()
	} else if err != nil {
		t.Errorf("%s: %v", name, err)
		return r
	}
	data, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Errorf("%s wrote no summary: %v\n%s", name, err, r.Stderr)
		return r
	}
	if len(data) > workerresult.MaxSize {
		t.Errorf("%s: summary is %d bytes, over the termination message limit", name, len(data))
	}
	if r.Summary, err = workerresult.Decode(data); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	return r
}

// ExclusionDir writes an exclusion list in upstream's layout
// (exclude-<configmap>/<file>.json) and returns the directory to pass as
// --exclusion-dir.
func ExclusionDir(t *testing.T, patterns ...string) string {
	t.Helper()
	dir := t.TempDir()
	sub := filepath.Join(dir, "exclude-test-list")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(map[string][]string{"excluded": patterns})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "excluded.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// SharedDir is a pod's hand-off directory, short enough for socket paths.
func SharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shared")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// WithDefaults appends each --flag=value of defaults whose flag args do not
// already set.
func WithDefaults(args []string, defaults ...string) []string {
	out := append([]string{}, args...)
	for _, d := range defaults {
		flag, _, _ := strings.Cut(d, "=")
		set := false
		for _, a := range args {
			if a == flag || strings.HasPrefix(a, flag+"=") {
				set = true
			}
		}
		if !set {
			out = append(out, d)
		}
	}
	return out
}
