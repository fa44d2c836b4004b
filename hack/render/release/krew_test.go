package release

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestKrewManifestFor(t *testing.T) {
	sums := map[string]string{"linux/amd64": "aa", "linux/arm64": "bb", "windows/amd64": "cc"}
	out, err := KrewManifestFor("1.2.3", DefaultKrewURIBase, sums, []string{"linux/amd64", "windows/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	want := []krewPlatform{
		{Selector: map[string]map[string]string{"matchLabels": {"os": "linux", "arch": "amd64"}},
			URI: "https://github.com/eraser-oss/eraser/releases/download/v1.2.3/kubectl-eraser-linux-amd64.tar.gz", SHA256: "aa", Bin: "kubectl-eraser"},
		{Selector: map[string]map[string]string{"matchLabels": {"os": "windows", "arch": "amd64"}},
			URI: "https://github.com/eraser-oss/eraser/releases/download/v1.2.3/kubectl-eraser-windows-amd64.tar.gz", SHA256: "cc", Bin: "kubectl-eraser.exe"},
	}
	if diff := cmp.Diff(want, p.Spec.Platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	if p.Spec.Version != "v1.2.3" || p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Metadata["name"] != "eraser" {
		t.Errorf("manifest %+v", p)
	}
	if _, err := KrewManifestFor("1.2.3", "https://example.com/d", sums, []string{"darwin/arm64"}); err == nil {
		t.Error("a platform without an archive was written")
	}
}

// The same entries make the same archive, so that a release made again
// changes nothing.
func TestTarGzReproducible(t *testing.T) {
	entries := []tarEntry{{"kubectl-eraser", []byte("binary"), 0o755}, {"LICENSE", []byte("text"), 0o644}}
	a, err := tarGz(entries)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tarGz(entries)
	if !cmp.Equal(a, b) {
		t.Error("two archives of the same entries differ")
	}
}
