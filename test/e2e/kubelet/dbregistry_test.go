//go:build linux

package kubelet

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// dbRegistry is the scanner module's fixture DB registry (fixturedb
// -serve), standing for ghcr.io's trivy-db: served on the host at the
// kubernetes Service's address, which the cluster puts on a bridge of the
// host, so the manager's pod reaches it as it would an outside registry.
// It counts the downloads of the DB's archive.
type dbRegistry struct {
	// repo serves the DB; refused answers every request 429.
	repo, refused string
	// addr is the registry's host:port.
	addr string
}

// serveDB starts a dbRegistry for the test.
func serveDB(t *testing.T) *dbRegistry {
	t.Helper()
	var svc corev1.Service
	if err := kube.Get(testCtx(t), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &svc); err != nil {
		t.Fatal(err)
	}
	cmd := command(repoRoot(), fixtureDB.Path(t), "-serve", svc.Spec.ClusterIP+":0")
	// The registry goes with this process if it dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	r := &dbRegistry{}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	deadline := time.After(2 * time.Minute)
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("fixturedb ended before it served: %s", stderr.String())
			}
			key, value, _ := strings.Cut(line, " ")
			switch key {
			case "repository":
				r.repo = value
				r.addr, _, _ = strings.Cut(value, "/")
			case "refused":
				r.refused = value
			case "ready":
				ready = true
			}
		case <-deadline:
			t.Fatalf("fixturedb did not serve within 2m: %s", stderr.String())
		}
	}
	return r
}

// archives is how many times the DB's archive was downloaded.
func (r *dbRegistry) archives(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/fixture/archives")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatalf("the registry's count: %q: %v", b, err)
	}
	return n
}
