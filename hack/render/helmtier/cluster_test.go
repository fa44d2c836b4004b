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
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	helmBin string
	kubectl string
	// home keeps Helm's cache, config and data out of the user's home.
	home string
}

// newCluster starts a control plane for one test and stops it at the end.
// Without the control plane or the Helm CLI the test is skipped, except
// under CI, where that fails it: a tier never passes by running nothing.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("install tier: run make test-install")
	}
	helmBin := helmBinary(t)
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
	return &cluster{t: t, env: env, helmBin: helmBin, kubectl: kubectl, home: t.TempDir()}
}

// helmBinary is the Helm CLI that hack/build-helm.sh built: $HELM (make
// sets it), else the script's cache.
func helmBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("HELM"); bin != "" {
		return bin
	}
	out, err := exec.Command("bash", "-c", `CHECK_ONLY=1 "$0"`, filepath.Join(testenv.RepoRoot(), "hack", "build-helm.sh")).Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Helm CLI: HELM is unset and hack/build-helm.sh has not built it")
	}
	t.Skip("no Helm CLI: run `make test-deploy`, which builds it (hack/build-helm.sh)")
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

// helm runs the Helm CLI and fails the test if it fails.
func (c *cluster) helm(args ...string) string {
	c.t.Helper()
	out, err := c.run(c.helmBin, "", args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
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

// waitEstablished waits until both CRDs serve, as kubectl wait would.
func (c *cluster) waitEstablished() {
	c.t.Helper()
	c.kubectlDo("wait", "--for=condition=Established", "--timeout=120s", "crd/"+imageListsCRD, "crd/"+imageJobsCRD)
}

func (c *cluster) createNamespace() {
	c.t.Helper()
	c.kubectlDo("create", "namespace", namespace)
}
