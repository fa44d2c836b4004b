// Package helmtier is the install tier driven as users drive it: the real
// Helm CLI and kubectl against a real API server that starts with no CRDs,
// so that each test sees the CRDs' whole life cycle (created by an install,
// upgraded, adopted, kept or removed) as a cluster would.
package helmtier

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/testing/crdwait"
	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

const (
	release   = "eraser"
	namespace = "eraser-system"
)

// cluster is one control plane of a test's own, with the tools a user
// points at it.
type cluster struct {
	t       *testing.T
	env     *testenv.Env
	helmCLI helmCLI
	kubectl string
	// home keeps Helm's cache, config and data out of the user's home.
	home string
}

// newCluster starts a control plane for one test and stops it at the end,
// with Helm 4 as its Helm CLI (a test of Helm's own commands takes each
// CLI with eachHelm and newClusterWith). Without the control plane or the
// Helm CLI the test is skipped, except under CI, where that fails it: a
// tier never passes by running nothing.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("install tier: run make test-install")
	}
	return newClusterWith(t, helmCLI{major: 4, bin: helmBinary(t, 4)})
}

// newClusterWith is newCluster with the given Helm CLI.
func newClusterWith(t *testing.T, h helmCLI) *cluster {
	t.Helper()
	kubectl := testenv.Kubectl(t)
	env, err := testenv.Start(testenv.WithoutCRDs())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("control plane: %v", err)
		}
		t.Skipf("no control plane: %v; run `make test-deploy`, which builds it", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
	})
	return &cluster{t: t, env: env, helmCLI: h, kubectl: kubectl, home: t.TempDir()}
}

// helmCLI is one Helm CLI: Helm 3, which most clusters are still run with,
// or Helm 4.
type helmCLI struct {
	major int
	bin   string
}

// eachHelm runs test once with each Helm CLI, as subtests helm3 and helm4,
// each on a control plane of its own.
func eachHelm(t *testing.T, test func(t *testing.T, c *cluster)) {
	t.Helper()
	if testing.Short() {
		t.Skip("install tier: run make test-install")
	}
	for _, major := range []int{3, 4} {
		t.Run(fmt.Sprintf("helm%d", major), func(t *testing.T) {
			test(t, newClusterWith(t, helmCLI{major: major, bin: helmBinary(t, major)}))
		})
	}
}

// helmBinary is the Helm CLI that hack/build-helm.sh built: $HELM or
// $HELM3 (make sets them), else the script's cache.
func helmBinary(t *testing.T, major int) string {
	t.Helper()
	env := "HELM"
	if major == 3 {
		env = "HELM3"
	}
	if bin := os.Getenv(env); bin != "" {
		return bin
	}
	cmd := exec.Command("bash", "-c", `CHECK_ONLY=1 "$0"`, filepath.Join(repo.Root(), "hack", "build-helm.sh"))
	cmd.Env = append(os.Environ(), fmt.Sprintf("HELM_MAJOR=%d", major))
	out, err := cmd.Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no Helm %d CLI: %s is unset and hack/build-helm.sh has not built it", major, env)
	}
	t.Skipf("no Helm %d CLI: run `make test-deploy`, which builds it (HELM_MAJOR=%d hack/build-helm.sh)", major, major)
	return ""
}

// run runs a tool with the cluster's kubeconfig and returns its combined
// output.
func (c *cluster) run(bin string, stdin string, args ...string) (string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+c.env.KubeconfigPath,
		"HELM_CACHE_HOME="+filepath.Join(c.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(c.home, "data"),
	)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	c.t.Logf("$ %s %s\n%s", filepath.Base(bin), strings.Join(args, " "), out.String())
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// helm runs the Helm CLI and fails the test if it fails. Helm 3 has no
// --force-conflicts (it applies client-side, with nothing to conflict):
// the docs give the flag for Helm 4 only, and it is left out here as a
// Helm 3 user leaves it out.
func (c *cluster) helm(args ...string) string {
	c.t.Helper()
	out, err := c.helmErr(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// helmErr runs the Helm CLI and returns its error.
func (c *cluster) helmErr(args ...string) (string, error) {
	c.t.Helper()
	if c.helmCLI.major == 3 {
		args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--force-conflicts" })
	}
	return c.run(c.helmCLI.bin, "", args...)
}

// kubectlIn runs kubectl with stdin and fails the test if it fails.
func (c *cluster) kubectlIn(stdin string, args ...string) string {
	c.t.Helper()
	out, err := c.run(c.kubectl, stdin, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func (c *cluster) kubectlDo(args ...string) string {
	c.t.Helper()
	return c.kubectlIn("", args...)
}

// crd is the CRD named name, nil when the cluster has none.
func (c *cluster) crd(name string) *apiextensionsv1.CustomResourceDefinition {
	c.t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := c.env.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return crd
}

// waitEstablished waits until both CRDs serve.
func (c *cluster) waitEstablished() {
	c.t.Helper()
	crdwait.Established(c.t, c.env.Client, 120*time.Second, imageListsCRD, imageJobsCRD)
}

func (c *cluster) createNamespace() {
	c.t.Helper()
	c.kubectlDo("create", "namespace", namespace)
}
