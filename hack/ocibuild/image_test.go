package main

// What a component's image holds, on Linux and on Windows: its config and
// its one layer's files.

import (
	"archive/tar"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestLinuxImage(t *testing.T) {
	img := imageFor(t, shared(t), linuxAMD64)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != "/pause" || c.User != "65532:65532" || c.WorkingDir != "/var/lib/pause" {
		t.Errorf("config: entrypoint %q user %q workdir %q", c.Entrypoint, c.User, c.WorkingDir)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   sourceURL,
		"org.opencontainers.image.version":  "v9.9.9-test",
		"org.opencontainers.image.revision": "0123456789abcdef",
	} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}
	if !cf.Created.Time.Equal(testEpoch) {
		t.Errorf("created %v, want the epoch", cf.Created)
	}
	files := layerFiles(t, img)
	for _, n := range []string{"etc/", "tmp/", "home/nonroot/", "var/", "var/lib/", "var/lib/pause/", "pause"} {
		if _, ok := files[n]; !ok {
			t.Errorf("layer lacks %s", n)
		}
	}
	if h := files["pause"]; h.hdr.Mode != 0o755 || h.hdr.Uid != 0 {
		t.Errorf("pause: mode %o uid %d", h.hdr.Mode, h.hdr.Uid)
	}
	if h := files["tmp/"]; h.hdr.Mode != 0o1777 {
		t.Errorf("tmp: mode %o", h.hdr.Mode)
	}
	if !strings.Contains(files["etc/passwd"].data, "nonroot:x:65532:65532:") || !strings.Contains(files["etc/group"].data, "nonroot:x:65532:") {
		t.Errorf("passwd/group lack nonroot:\n%s%s", files["etc/passwd"].data, files["etc/group"].data)
	}
	if files["etc/ssl/certs/ca-certificates.crt"].data != testCA {
		t.Error("the CA bundle was not copied")
	}
	for n, f := range files {
		if !f.hdr.ModTime.Equal(testEpoch) {
			t.Errorf("%s: mtime %v", n, f.hdr.ModTime)
		}
	}
}

func TestWindowsImage(t *testing.T) {
	img := imageFor(t, shared(t), windowsAMD64)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OSVersion != "" {
		t.Errorf("os.version = %q: a HostProcess image must match every Windows build", cf.OSVersion)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != `%CONTAINER_SANDBOX_MOUNT_POINT%\pause.exe` {
		t.Errorf("entrypoint %q", got)
	}
	files := layerFiles(t, img)
	for n, f := range files {
		if n != "Files" && !strings.HasPrefix(n, "Files/") {
			t.Errorf("%s is outside Files/", n)
		}
		if got := sddlOwnerGroup(t, f.hdr.PAXRecords["MSWINDOWS.rawsd"]); got != "O:S-1-5-32-545 G:S-1-5-32-545 no DACL" {
			t.Errorf("%s: security descriptor %s", n, got)
		}
	}
	for _, hive := range []string{"DEFAULT", "SAM", "SECURITY", "SOFTWARE", "SYSTEM"} {
		if _, ok := files["Files/Windows/System32/config/"+hive]; !ok {
			t.Errorf("no %s hive stub", hive)
		}
	}
	if exe := files["Files/pause.exe"].data; !strings.HasPrefix(exe, "MZ") {
		t.Errorf("Files/pause.exe is not a Windows executable")
	}
}

func imageFor(t *testing.T, b built, p platform) v1.Image {
	t.Helper()
	for _, r := range b.results {
		if r.Platform == p {
			return r.Image
		}
	}
	t.Fatalf("no image for %s", p)
	return nil
}

type file struct {
	hdr  *tar.Header
	data string
}

func layerFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v: want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = file{hdr: h, data: string(b)}
	}
}

// sddlOwnerGroup decodes a base64 self-relative security descriptor into
// its owner and group SIDs and whether it has a DACL.
func sddlOwnerGroup(t *testing.T, b64 string) string {
	t.Helper()
	sd, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sd) < 20 {
		t.Fatalf("security descriptor %q: %v", b64, err)
	}
	sid := func(off uint32) string {
		s := sd[off:]
		auth := uint64(0)
		for _, c := range s[2:8] {
			auth = auth<<8 | uint64(c)
		}
		out := fmt.Sprintf("S-%d-%d", s[0], auth)
		for i := 0; i < int(s[1]); i++ {
			out += fmt.Sprintf("-%d", binary.LittleEndian.Uint32(s[8+4*i:]))
		}
		return out
	}
	dacl := "no DACL"
	if binary.LittleEndian.Uint16(sd[2:])&0x4 != 0 {
		dacl = "DACL"
	}
	return fmt.Sprintf("O:%s G:%s %s", sid(binary.LittleEndian.Uint32(sd[4:])), sid(binary.LittleEndian.Uint32(sd[8:])), dacl)
}
