//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testleftovers"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// eraserNode runs "eraser node" against the runtime at endpoint.
func eraserNode(t *testing.T, endpoint string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "eraser"), append([]string{"node"}, args...)...)
	cmd.Env = append(os.Environ(), "ERASER_RUNTIME_ENDPOINT="+endpoint)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// leftoversOf lists the node's leftovers by kind and name.
func leftoversOf(t *testing.T, endpoint string, args ...string) map[leftoverkind.Kind][]leftover.Leftover {
	t.Helper()
	out, stderr, code := eraserNode(t, endpoint, append([]string{"list", "--leftovers", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("list --leftovers: exit %d: %s", code, stderr)
	}
	var found []leftover.Leftover
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		t.Fatalf("list --leftovers -o json: %v\n%s", err, out)
	}
	byKind := map[leftoverkind.Kind][]leftover.Leftover{}
	for _, l := range found {
		byKind[l.Kind] = append(byKind[l.Kind], l)
	}
	return byKind
}

// TestContainerdLeftovers makes each of containerd's leftovers through its
// own API, as the field's cases left them (testleftovers.Make): an image
// whose named records a removal deleted and whose ID record it did not
// (containerd#13875), an image in another namespace, a lease an import
// never ended, content labelled as a garbage-collection root. "eraser node
// list --leftovers" finds each with the bytes only it holds; the kubelet's
// images are none.
func TestContainerdLeftovers(t *testing.T) {
	c := testcontainerd.Start(t)
	endpoint := c.CRIEndpoint()
	// An import may leave a blob nothing holds until the next collection
	// (the archive's own index): listed, and nothing else.
	found := leftoversOf(t, endpoint)
	delete(found, leftoverkind.Unreferenced)
	if len(found) != 0 {
		t.Fatalf("a fresh node has leftovers: %+v", found)
	}

	made := testleftovers.Make(t, testleftovers.New(t, c))

	found = leftoversOf(t, endpoint, "--lease-age=0s")
	for _, problem := range made.Missing(flatten(found)) {
		t.Error(problem)
	}
	if t.Failed() {
		t.Logf("found %+v", found)
	}
	// Under the default lease age the lease is a pull in progress.
	if l := leftoversOf(t, endpoint)[leftoverkind.OldLease]; len(l) != 0 {
		t.Errorf("a lease made seconds ago is listed under the default age: %+v", l)
	}
}
