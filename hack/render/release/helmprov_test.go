package release

// The chart signed as helm package --sign signs it, verified with the
// Helm CLI as a user verifies it.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// helmCLI is the Helm 4 CLI that hack/build-helm.sh built: $HELM (make
// sets it), else the script's cache.
func helmCLI(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("HELM"); bin != "" {
		return bin
	}
	out, err := exec.Command("bash", "-c", `CHECK_ONLY=1 "$0"`, filepath.Join(repoRoot(t), "hack", "build-helm.sh")).Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Helm CLI: HELM is unset and hack/build-helm.sh has not built it")
	}
	t.Skip("no Helm CLI: run make test-deploy, which builds it (hack/build-helm.sh)")
	return ""
}

// writeKeyrings writes a new OpenPGP key as a secret keyring and a public
// one, the files gpg --export-secret-keys and gpg --export write.
func writeKeyrings(t *testing.T, dir, name string) (secret, public string) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	secret, public = filepath.Join(dir, name+"-secring.gpg"), filepath.Join(dir, name+"-pubring.gpg")
	for file, write := range map[string]func(*os.File) error{
		secret: func(f *os.File) error { return e.SerializePrivate(f, nil) },
		public: func(f *os.File) error { return e.Serialize(f) },
	} {
		f, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := write(f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return secret, public
}

// A release with a Helm signing key pushes the chart with its provenance
// file: helm pull --verify fetches both from the registry and verifies
// them with the public keyring, and refuses another key's.
func TestChartProvenanceVerifiesWithHelm(t *testing.T) {
	if testing.Short() {
		t.Skip("install tier: runs the Helm CLI against a loopback registry; run make test-install")
	}
	helm := helmCLI(t)
	keys := t.TempDir()
	secret, public := writeKeyrings(t, keys, "eraser-release")
	_, otherPublic := writeKeyrings(t, keys, "someone-else")
	signer, err := LoadHelmSigner(secret, "eraser-release", nil)
	if err != nil {
		t.Fatal(err)
	}

	helmConfig := isolate(t)
	reg := startRegistry(t)
	images := t.TempDir()
	writeLayouts(t, images, reg, testVersion)
	o := options(t, reg, images, helmConfig)
	o.HelmSigner = signer
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}

	pull := func(keyring string) (string, error) {
		dir := t.TempDir()
		cmd := exec.Command(helm, "pull", "oci://"+reg+"/"+ChartRepo, "--version", testVersion, "--plain-http",
			"--verify", "--keyring", keyring, "-d", dir, "--registry-config", helmConfig)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := pull(public)
	if err != nil {
		t.Fatalf("helm pull --verify: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Signed by: eraser-release") {
		t.Errorf("helm pull --verify does not name the signer:\n%s", out)
	}
	if out, err := pull(otherPublic); err == nil {
		t.Errorf("helm pull --verify with another key's keyring passed:\n%s", out)
	}
}
