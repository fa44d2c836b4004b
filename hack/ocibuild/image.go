package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	Name     string
	Dir      bool
	Mode     int64
	UID, GID int
	Data     []byte
}

// composeImage makes the image of one component for one platform: one
// layer on an empty base, OCI media types, every timestamp o.Epoch.
func composeImage(o options, c component, p platform, bin, caCerts []byte) (v1.Image, error) {
	var (
		entries []entry
		pax     map[string]string
		cfg     v1.Config
	)
	labels := map[string]string{
		"org.opencontainers.image.source":   sourceURL,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.title":    c.Repo,
	}
	if p.OS == "windows" {
		entries, pax = windowsEntries(binaryName(c, p), bin), map[string]string{"MSWINDOWS.rawsd": usersSecurityDescriptor()}
		// HostProcess containers see their image's files under the
		// sandbox mount point, which the runtime expands in the command
		// line; they run on the host, so there is no working directory
		// of the image's to set. The user is the one the worker pods ask
		// for (they need the runtime's named pipe).
		cfg = v1.Config{
			Entrypoint: []string{`%CONTAINER_SANDBOX_MOUNT_POINT%\` + binaryName(c, p)},
			User:       `NT AUTHORITY\SYSTEM`,
			Labels:     labels,
		}
	} else {
		entries = linuxEntries(c, binaryName(c, p), bin, caCerts)
		cfg = v1.Config{
			Entrypoint: []string{"/" + binaryName(c, p)},
			User:       c.User,
			WorkingDir: c.WorkDir,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Labels:     labels,
		}
	}
	layer, err := makeLayer(entries, pax, o.Epoch)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Epoch}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   created,
		CreatedBy: "hack/ocibuild",
		Comment:   binaryName(c, p) + " and the files a static binary needs",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Created = created
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// linuxEntries is what a static Go binary needs around it: passwd and group
// naming root and nonroot (65532, as distroless does) so that user lookups
// and tools work, a home for nonroot, a /tmp, the CA bundle, and the
// working directory.
func linuxEntries(c component, binName string, bin, caCerts []byte) []entry {
	es := []entry{
		{Name: "etc/", Dir: true, Mode: 0o755},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Name: "home/", Dir: true, Mode: 0o755},
		{Name: "home/nonroot/", Dir: true, Mode: 0o700, UID: 65532, GID: 65532},
		{Name: "root/", Dir: true, Mode: 0o700},
		{Name: "tmp/", Dir: true, Mode: 0o1777},
		{Name: binName, Mode: 0o755, Data: bin},
	}
	if caCerts != nil {
		es = append(es,
			entry{Name: "etc/ssl/", Dir: true, Mode: 0o755},
			entry{Name: "etc/ssl/certs/", Dir: true, Mode: 0o755},
			entry{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: caCerts})
	}
	if wd := strings.Trim(c.WorkDir, "/"); wd != "" {
		parts := strings.Split(wd, "/")
		for i := range parts {
			es = append(es, entry{Name: strings.Join(parts[:i+1], "/") + "/", Dir: true, Mode: 0o755})
		}
	}
	return dedupe(es)
}

// windowsEntries is the layer of a HostProcess image: everything under
// Files/ (Windows layers keep files there and registry changes under
// Hives/, which an image like this has none of). Being the image's base
// layer, it carries the registry hive files that Windows checks for when
// it unpacks a base layer; HostProcess containers never load them, so
// they are empty, as in Microsoft's own HostProcess base image. The image
// sets no os.version: the runtime's platform matching then accepts it on
// every Windows build, which suits a process that runs on the host.
func windowsEntries(binName string, bin []byte) []entry {
	es := []entry{
		{Name: "Files", Dir: true, Mode: 0o755},
		{Name: "Files/Windows", Dir: true, Mode: 0o755},
		{Name: "Files/Windows/System32", Dir: true, Mode: 0o755},
		{Name: "Files/Windows/System32/config", Dir: true, Mode: 0o755},
	}
	for _, hive := range []string{"DEFAULT", "SAM", "SECURITY", "SOFTWARE", "SYSTEM"} {
		es = append(es, entry{Name: "Files/Windows/System32/config/" + hive, Mode: 0o644, Data: []byte{}})
	}
	return append(es, entry{Name: "Files/" + binName, Mode: 0o755, Data: bin})
}

// usersSecurityDescriptor is the Windows security descriptor given to every
// file of a Windows layer (the PAX record MSWINDOWS.rawsd, base64): owner
// and group BUILTIN\Users and no DACL at all, which grants every account
// access, so the binary runs whichever account the container uses. In
// SDDL: "O:BUG:BU".
func usersSecurityDescriptor() string {
	// S-1-5-32-545: revision 1, two sub-authorities, NT authority (5),
	// BUILTIN (32), Users (545).
	sid := []byte{1, 2, 0, 0, 0, 0, 0, 5}
	sid = binary.LittleEndian.AppendUint32(sid, 32)
	sid = binary.LittleEndian.AppendUint32(sid, 545)
	const header = 20
	sd := []byte{1, 0}                                                 // revision 1, reserved
	sd = binary.LittleEndian.AppendUint16(sd, 0x8000)                  // control: self-relative only
	sd = binary.LittleEndian.AppendUint32(sd, header)                  // owner
	sd = binary.LittleEndian.AppendUint32(sd, header+uint32(len(sid))) // group
	sd = binary.LittleEndian.AppendUint32(sd, 0)                       // no SACL
	sd = binary.LittleEndian.AppendUint32(sd, 0)                       // no DACL
	sd = append(append(sd, sid...), sid...)
	return base64.StdEncoding.EncodeToString(sd)
}

// dedupe keeps the first entry of each name, in order: directories that
// two parts of the layout share are written once.
func dedupe(es []entry) []entry {
	seen := map[string]bool{}
	var out []entry
	for _, e := range es {
		if !seen[e.Name] {
			seen[e.Name] = true
			out = append(out, e)
		}
	}
	return out
}

// makeLayer writes the entries, parents first, with fixed timestamps and
// owners, and compresses the result once: the layer's digests are a
// function of the entries alone.
func makeLayer(es []entry, pax map[string]string, epoch time.Time) (v1.Layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range sortParentsFirst(es) {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Uid: e.UID, Gid: e.GID, ModTime: epoch, Format: tar.FormatPAX}
		if e.Dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Data))
		}
		if pax != nil {
			h.PAXRecords = pax
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// sortParentsFirst orders entries by path: a directory's path is a prefix
// of its children's, so it comes before them.
func sortParentsFirst(es []entry) []entry {
	out := slices.Clone(es)
	slices.SortStableFunc(out, func(a, b entry) int { return strings.Compare(path.Clean(a.Name), path.Clean(b.Name)) })
	return out
}
