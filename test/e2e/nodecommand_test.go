//go:build linux

package e2e

// eraser node, the command an operator runs on a node by hand.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/cli/nodecmd"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// TestNodeCommand: "eraser node list" explains each image, the pinned and
// sandbox images included; "prune" removes what it may and says why it
// kept the rest.
func TestNodeCommand(t *testing.T) {
	onEveryRuntime(t, nodeCommand)
}

func nodeCommand(t *testing.T, n *workerNode) {
	exclFile := filepath.Join(workertest.ExclusionDir(t, keepExact), "exclude-test-list", "excluded.json")
	stateDir := t.TempDir()
	eraser := func(args ...string) (string, string, int) {
		if len(args) > 0 && args[0] == "prune" {
			args = workertest.WithDefaults(args, "--state-dir="+stateDir, "--min-age=0s")
		}
		cmd := exec.Command(filepath.Join(bin, "eraser"), append([]string{"node"}, args...)...)
		cmd.Env = append(os.Environ(), "ERASER_RUNTIME_ENDPOINT="+n.CRIEndpoint())
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if exitErr, ok := err.(*exec.ExitError); ok {
			code = exitErr.ExitCode()
		}
		return out.String(), errOut.String(), code
	}
	out, stderr, code := eraser("list", "--exclude-file="+exclFile)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"VERDICT", "keep: in use", "container running", "keep: pinned", "keep: excluded", "removable", junkA} {
		if !strings.Contains(out, want) {
			t.Errorf("list output lacks %q:\n%s", want, out)
		}
	}
	// containerd 1.6 and 1.7 name the sandbox image in their status;
	// 2.x pins it instead: kept either way, and the line says which.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, n.rt.SandboxImage) && !strings.Contains(line, "sandbox image") && !strings.Contains(line, "pinned by the runtime") {
			t.Errorf("the sandbox image's line does not say why it is kept: %s", line)
		}
	}
	before := n.present(t)
	if _, stderr, code := eraser("prune"); code != 2 || !strings.Contains(stderr, "prune needs --images") {
		t.Errorf("prune without --images: exit %d: %s", code, stderr)
	}
	out, _, code = eraser("prune", "--images=*", "--dry-run", "--exclude-file="+exclFile)
	if code != 0 || !strings.Contains(out, "would free") {
		t.Errorf("prune --dry-run: exit %d\n%s", code, out)
	}
	if diff := cmp.Diff(before, n.present(t)); diff != "" {
		t.Errorf("dry run changed the node:\n%s", diff)
	}
	out, stderr, code = eraser("prune", "--images="+junkA+","+runImage)
	if code != 0 || !strings.Contains(out, "1 removed, 1 in use") || !strings.Contains(stderr, "2/2 images processed") && !strings.Contains(stderr, "1/1 images processed") {
		t.Errorf("prune: exit %d\n%s\n%s", code, out, stderr)
	}
	if n.present(t)[junkA] {
		t.Error("junk/a still there after prune")
	}
	if _, stderr, code := eraser("prune", "--images=*", "--runtime-endpoint=unix:///nope.sock"); code != 1 || !strings.Contains(stderr, "runtime socket /nope.sock") {
		t.Errorf("missing socket: exit %d: %s", code, stderr)
	}

	// As a scripting tool: JSON, help that exits 0, each subcommand's own
	// flags, and exit codes that tell failures apart.
	out, _, code = eraser("list", "-o", "json")
	var listed []nodecmd.ListedImage
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil {
		t.Fatalf("list -o json: exit %d, %v\n%s", code, err, out)
	}
	verdicts := map[string]string{}
	for _, img := range listed {
		for _, name := range img.Names {
			verdicts[name] = img.Verdict
		}
	}
	want := map[string]string{junkC: "removable", runImage: "in use", exitedImage: "in use", createdImage: "in use"}
	for _, p := range n.pinned() {
		want[p] = "pinned"
	}
	for name, v := range want {
		if verdicts[name] != v {
			t.Errorf("list -o json: %s: verdict %q, want %q (all: %v)", name, verdicts[name], v, verdicts)
		}
	}
	for _, help := range [][]string{{"-h"}, {"list", "-h"}, {"prune", "--help"}} {
		if _, stderr, code := eraser(help...); code != nodecmd.ExitOK {
			t.Errorf("%v: exit %d: %s", help, code, stderr)
		}
	}
	if _, stderr, code := eraser("list", "--images=x"); code != nodecmd.ExitUsage || !strings.Contains(stderr, "flag provided but not defined: -images") {
		t.Errorf("list with a prune flag: exit %d: %s", code, stderr)
	}
	// As a script calls it: what it removed, and why it kept the rest.
	targets := append([]string{junkC, runImage}, n.pinned()...)
	out, stderr, code = eraser("prune", "-o", "json", "--images="+strings.Join(targets, ",")+",Not A Reference")
	var pruned nodecmd.PruneOutput
	if err := json.Unmarshal([]byte(out), &pruned); code != nodecmd.ExitInvalidEntry || err != nil || pruned.Summary.Counts["removed"] != 1 || pruned.Summary.Counts["invalid"] != 1 {
		t.Errorf("prune with an invalid entry: exit %d (want %d), %v\n%s\n%s", code, nodecmd.ExitInvalidEntry, err, out, stderr)
	}
	outcomes := map[string]string{}
	for _, r := range pruned.Results {
		outcomes[r.Target] = r.Outcome
	}
	wantOutcomes := map[string]string{junkC: "removed", runImage: "in use"}
	for _, p := range n.pinned() {
		wantOutcomes[p] = "pinned"
	}
	for target, o := range wantOutcomes {
		if outcomes[target] != o {
			t.Errorf("prune -o json: %s: outcome %q, want %q (all: %v)", target, outcomes[target], o, outcomes)
		}
	}
	if n.present(t)[junkC] {
		t.Error("the valid entry beside an invalid one was not removed")
	}
	version, _ := exec.Command(filepath.Join(bin, "eraser"), "version").Output()
	if !strings.HasPrefix(string(version), "eraser/cli/") {
		t.Errorf("eraser version: %q", version)
	}

	// The retention policies, as a scheduled run applies them: the node's
	// history starts now, so nothing is unused for a day until a (pinned)
	// day has passed.
	if _, stderr, code := eraser("prune", "--high-threshold-percent=80", "--low-threshold-percent=80"); code != 2 || !strings.Contains(stderr, "must be below") {
		t.Errorf("low not below high: exit %d: %s", code, stderr)
	}
	out, _, code = eraser("prune", "--unused-for=24h", "--exclude-file="+exclFile)
	if code != 0 || !strings.Contains(out, "recently used") || strings.Contains(out, "UnusedFor:") {
		t.Errorf("prune --unused-for on day 0: exit %d\n%s", code, out)
	}
	out, _, code = eraser("prune", "--unused-for=24h", "--exclude-file="+exclFile, "--now="+time.Now().Add(25*time.Hour).UTC().Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "UnusedFor: ") || n.present(t)[junkB] || !n.present(t)[keepExact] || !n.present(t)[runImage] {
		t.Errorf("prune --unused-for a day later: exit %d, present %v\n%s", code, n.present(t), out)
	}
}
