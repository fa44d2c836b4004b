package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testComponent is a tiny image (the tests' pause binary), built for one
// Linux and the Windows platform so that the index, both layer layouts and
// the tarballs are exercised without the cost of the real components.
var testComponent = component{
	Name: "pause", Repo: "ocibuild-test-pause", Module: ".", Package: "./test/images/pause",
	Platforms: []platform{linuxAMD64, windowsAMD64}, User: "65532:65532", WorkDir: "/var/lib/pause",
}

const testCA = "-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n"

var testEpoch = time.Unix(1700000000, 0).UTC()

type built struct {
	out     string
	results []result
	err     error
}

var (
	buildOnce  sync.Once
	firstBuild built
)

// buildTestImages builds testComponent into a fresh directory.
func buildTestImages(t *testing.T, out string) built {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte(testCA), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{
		Root: root, Out: out, Registry: "example.test/eraser", Version: "v9.9.9-test", Revision: "0123456789abcdef",
		Tags: "grpcnotrace", LDFlags: "-s -w", CACerts: ca, Epoch: testEpoch, Log: t.Logf,
	}
	results, err := build(context.Background(), o, []component{testComponent}, []platform{linuxAMD64, windowsAMD64, linuxARM64})
	return built{out: out, results: results, err: err}
}

// shared is the one build most tests look at.
func shared(t *testing.T) built {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ocibuild-test")
		if err != nil {
			firstBuild.err = err
			return
		}
		firstBuild = buildTestImages(t, dir)
	})
	if firstBuild.err != nil {
		t.Fatal(firstBuild.err)
	}
	return firstBuild
}

func TestMain(m *testing.M) {
	code := m.Run()
	if firstBuild.out != "" {
		_ = os.RemoveAll(firstBuild.out)
	}
	os.Exit(code)
}

const testRef = "example.test/eraser/ocibuild-test-pause:v9.9.9-test"

func TestLayoutHoldsAMultiPlatformIndex(t *testing.T) {
	b := shared(t)
	if len(b.results) != 2 {
		t.Fatalf("built %d images, want linux/amd64 and windows/amd64 only (linux/arm64 is not the component's)", len(b.results))
	}
	p, err := layout.FromPath(filepath.Join(b.out, "pause"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want the one index", len(topManifest.Manifests))
	}
	desc := topManifest.Manifests[0]
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != "v9.9.9-test" {
		t.Errorf("ref.name = %q", got)
	}
	if got := desc.Annotations["io.containerd.image.name"]; got != testRef {
		t.Errorf("io.containerd.image.name = %q", got)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if m.Platform == nil || m.Platform.OS != cf.OS || m.Platform.Architecture != cf.Architecture {
			t.Errorf("descriptor platform %v, config says %s/%s", m.Platform, cf.OS, cf.Architecture)
		}
		plats = append(plats, cf.OS+"/"+cf.Architecture)
	}
	if got := strings.Join(plats, " "); got != "linux/amd64 windows/amd64" {
		t.Errorf("index platforms = %s", got)
	}
}

// TestReproducible builds again into another directory: same digests,
// byte-identical tarballs.
func TestReproducible(t *testing.T) {
	a := shared(t)
	b := buildTestImages(t, t.TempDir())
	if b.err != nil {
		t.Fatal(b.err)
	}
	for i := range a.results {
		da, _ := a.results[i].Image.Digest()
		db, _ := b.results[i].Image.Digest()
		if da != db {
			t.Errorf("%s: digest %s then %s", a.results[i].Platform, da, db)
		}
		if ha, hb := fileSum(t, a.results[i].Tarball), fileSum(t, b.results[i].Tarball); ha != hb {
			t.Errorf("%s differs between builds", filepath.Base(a.results[i].Tarball))
		}
	}
	if ha, hb := fileSum(t, filepath.Join(a.out, "pause", "index.json")), fileSum(t, filepath.Join(b.out, "pause", "index.json")); ha != hb {
		t.Error("the layouts' index.json differ")
	}
}

func TestTarballNamesTheImage(t *testing.T) {
	r := shared(t).results[0]
	if filepath.Base(r.Tarball) != "pause_linux_amd64.tar" {
		t.Errorf("tarball %s", r.Tarball)
	}
	tag, err := name.NewTag(testRef)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(r.Tarball, &tag)
	if err != nil {
		t.Fatalf("the tarball has no %s: %v", testRef, err)
	}
	got, _ := img.ConfigName()
	want, _ := r.Image.ConfigName()
	if got != want {
		t.Errorf("tarball image %s, built %s", got, want)
	}
}

func TestOptionalComponentIsSkipped(t *testing.T) {
	c := testComponent
	c.Package, c.Optional = "./hack/ocibuild/testdata-does-not-exist", true
	var logged []string
	o := options{Root: "../..", Out: t.TempDir(), Log: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}
	_, err := build(context.Background(), o, []component{c}, []platform{linuxAMD64})
	if err == nil || !strings.Contains(strings.Join(logged, "\n"), "skipping pause") {
		t.Errorf("err %v, log %q: want the component skipped and nothing built", err, logged)
	}
}

func TestSelection(t *testing.T) {
	cs, err := selectComponents("manager, remover")
	if err != nil || len(cs) != 2 || cs[0].Name != "manager" || cs[1].Name != "remover" {
		t.Errorf("selectComponents = %v, %v", cs, err)
	}
	if _, err := selectComponents("manager scanner"); err == nil {
		t.Error("an unknown image was accepted")
	}
	ps, err := parsePlatforms("linux/amd64 windows/amd64")
	if err != nil || len(ps) != 2 || ps[1] != windowsAMD64 {
		t.Errorf("parsePlatforms = %v, %v", ps, err)
	}
	if _, err := parsePlatforms("linux"); err == nil {
		t.Error("a platform without an architecture was accepted")
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// Images built for another registry name it as the workers' default
// registry; the default registry's builds are stamped as before.
func TestLDFlagsStampTheRegistry(t *testing.T) {
	o := options{LDFlags: "-s -w", Version: "1.2.3", Revision: "abc", Registry: "127.0.0.1:5000/eraser"}
	want := "-s -w -X " + versionPackage + ".Version=1.2.3 -X " + versionPackage + ".Commit=abc -X " + versionPackage + ".DefaultRepo=127.0.0.1:5000/eraser"
	if got := buildLDFlags(o); got != want {
		t.Errorf("ldflags %q, want %q", got, want)
	}
	o.Registry = "ghcr.io/eraser-oss"
	if got := buildLDFlags(o); strings.Contains(got, "DefaultRepo") {
		t.Errorf("default registry stamped: %q", got)
	}
}
