package release

// A signed release, verified with the cosign CLI as a user verifies it.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/eraser-oss/eraser/internal/testing/gobuild"
)

// testSigner is a fresh key, for tests that need a signed release but
// not the cosign CLI.
func testSigner(t *testing.T) *Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{key: k}
}

// cosignBinary is the cosign CLI that hack/build-cosign.sh built: $COSIGN
// (make sets it), else the script's cache.
func cosignBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("COSIGN"); bin != "" {
		return bin
	}
	out, err := exec.Command("bash", "-c", `CHECK_ONLY=1 "$0"`, filepath.Join(repoRoot(t), "hack", "build-cosign.sh")).Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no cosign CLI: COSIGN is unset and hack/build-cosign.sh has not built it")
	}
	t.Skip("no cosign CLI: run make test-deploy, which builds it (hack/build-cosign.sh)")
	return ""
}

// cosign runs the cosign CLI offline, with its home in a test directory.
func cosign(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "COSIGN_PASSWORD=test password", "TUF_ROOT="+filepath.Join(dir, "tuf"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("cosign %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// pause is the tests' pause program for linux/amd64: a small Go binary
// whose build information the SBOM and provenance must carry.
var pause = gobuild.New("test/images/pause").For("linux", "amd64")

func TestMain(m *testing.M) {
	code := m.Run()
	pause.Remove()
	os.Exit(code)
}

func buildPause(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(pause.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeBinaryLayouts writes, as writeLayouts does, a layout for every
// image, each platform image holding a Go binary and a passwd file and
// labelled with a revision, as hack/ocibuild's are.
func writeBinaryLayouts(t *testing.T, dir, registry, version string, bin []byte, platforms ...string) {
	t.Helper()
	files := []struct {
		name string
		data []byte
	}{{"etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\n")}, {"pause", bin}}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromReader(bytes.NewReader(raw.Bytes()), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range Images {
		var adds []mutate.IndexAddendum
		for _, p := range im.Platforms {
			if !slices.Contains(platforms, p) {
				continue
			}
			goos, goarch, _ := strings.Cut(p, "/")
			img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			cf.OS, cf.Architecture = goos, goarch
			cf.Config.Labels = map[string]string{labelRevision: "0123456789abcdef0123456789abcdef01234567", labelSource: "https://github.com/eraser-oss/eraser", labelVersion: version}
			if img, err = mutate.ConfigFile(img, cf); err != nil {
				t.Fatal(err)
			}
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
		lp, err := layout.Write(filepath.Join(dir, im.Name), empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			annotationRefName:       version,
			annotationContainerName: ImageRef(registry, im.Repo, version),
		})); err != nil {
			t.Fatal(err)
		}
	}
}

// attested decodes the in-toto statements cosign verify-attestation
// printed (one DSSE envelope per line).
func attested(t *testing.T, out string) []map[string]any {
	t.Helper()
	var sts []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var env envelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatalf("cosign printed %q: %v", line, err)
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := json.Unmarshal(payload, &st); err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	return sts
}

// A release signed with a key from cosign generate-key-pair: the cosign
// CLI verifies, offline and with that key only, every image (the index and
// each platform image), its SPDX SBOM and its SLSA provenance (which name
// the Go modules of the binary in it), and the chart; another key
// verifies nothing; releasing again adds no second signature.
func TestSignedReleaseVerifiesWithCosign(t *testing.T) {
	if testing.Short() {
		t.Skip("install tier: runs the cosign CLI against a loopback registry; run make test-install")
	}
	bin := cosignBinary(t)
	keys := t.TempDir()
	if _, err := cosign(t, bin, keys, "generate-key-pair"); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, err := cosign(t, bin, other, "generate-key-pair"); err != nil {
		t.Fatal(err)
	}
	signer, err := LoadSigner(filepath.Join(keys, "cosign.key"), []byte("test password"))
	if err != nil {
		t.Fatalf("the key cosign generated: %v", err)
	}
	if _, err := LoadSigner(filepath.Join(keys, "cosign.key"), []byte("wrong")); err == nil || !strings.Contains(err.Error(), "wrong password") {
		t.Errorf("a wrong password: %v", err)
	}

	helmConfig := isolate(t)
	reg := startRegistry(t)
	images := t.TempDir()
	writeBinaryLayouts(t, images, reg, testVersion, buildPause(t), "linux/amd64")
	o := options(t, reg, images, helmConfig)
	o.Platforms = []string{"linux/amd64"}
	o.Signer = signer
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}

	pub := filepath.Join(keys, "cosign.pub")
	verify := []string{"--key", pub, "--insecure-ignore-tlog", "--allow-insecure-registry", "--allow-http-registry"}
	var refs []string
	for _, p := range res.Images {
		repo := strings.TrimSuffix(p.Ref, ":"+testVersion)
		refs = append(refs, repo+"@"+p.Digest)
		idx, err := remote.Index(mustDigest(t, repo+"@"+p.Digest))
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range m.Manifests {
			refs = append(refs, repo+"@"+d.Digest.String())
		}
	}
	chartRef := strings.TrimSuffix(res.Chart.Ref, ":"+testVersion) + "@" + res.Chart.Digest
	for _, ref := range append(slices.Clone(refs), chartRef) {
		if _, err := cosign(t, bin, keys, append(append([]string{"verify"}, verify...), ref)...); err != nil {
			t.Errorf("the signature of %s: %v", ref, err)
		}
		otherKey := []string{"verify", "--key", filepath.Join(other, "cosign.pub"), "--insecure-ignore-tlog", "--allow-insecure-registry", "--allow-http-registry", ref}
		if _, err := cosign(t, bin, other, otherKey...); err == nil {
			t.Errorf("%s verified with another key", ref)
		}
	}
	for _, ref := range refs {
		out, err := cosign(t, bin, keys, append(append([]string{"verify-attestation", "--type", "spdxjson"}, verify...), ref)...)
		if err != nil {
			t.Errorf("the SBOM of %s: %v", ref, err)
			continue
		}
		for _, st := range attested(t, out) {
			doc, _ := json.Marshal(st["predicate"])
			for _, want := range []string{`"spdxVersion":"SPDX-2.3"`, `"fileName":"/pause"`, `"fileName":"/etc/passwd"`, `pkg:golang/github.com/eraser-oss/eraser@v` + testVersion, `pkg:golang/stdlib@go`} {
				if !strings.Contains(string(doc), want) {
					t.Errorf("the SBOM of %s lacks %s: %s", ref, want, doc)
				}
			}
		}
		out, err = cosign(t, bin, keys, append(append([]string{"verify-attestation", "--type", "slsaprovenance"}, verify...), ref)...)
		if err != nil {
			t.Errorf("the provenance of %s: %v", ref, err)
			continue
		}
		for _, st := range attested(t, out) {
			doc, _ := json.Marshal(st["predicate"])
			for _, want := range []string{
				`"builder":{"id":"` + DefaultBuilderID + `"}`,
				`"configSource":{"digest":{"sha1":"0123456789abcdef0123456789abcdef01234567"},"entryPoint":"make release","uri":"git+https://github.com/eraser-oss/eraser"}`,
				`{"uri":"pkg:golang/stdlib@go`,
				`"GOOS":"linux"`,
			} {
				if !strings.Contains(string(doc), want) {
					t.Errorf("the provenance of %s lacks %s: %s", ref, want, doc)
				}
			}
		}
	}

	// Again: everything is already signed by this key.
	var buf bytes.Buffer
	o.Out = &buf
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "signed ") {
		t.Errorf("a second release signed again:\n%s", buf.String())
	}
	for _, ref := range refs[:1] {
		d := mustDigest(t, ref)
		sig, err := remote.Image(sigTag(d.Context(), mustHash(t, d.DigestStr()), "sig"))
		if err != nil {
			t.Fatal(err)
		}
		if ls, _ := sig.Layers(); len(ls) != 1 {
			t.Errorf("%s has %d signatures after two releases, want 1", ref, len(ls))
		}
	}
}

func mustDigest(t *testing.T, ref string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
