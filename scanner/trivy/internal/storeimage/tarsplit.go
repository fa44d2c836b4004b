package storeimage

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// layerTar streams the layer's tar exactly as it was pulled, rebuilt from
// what the store keeps: the tar's headers and padding (containers/storage's
// tar-split record, <id>.tar-split.gz) around the files' contents read from
// the layer's diff directory. Rebuilding the original stream, not walking
// the directory, keeps whiteouts and opaque directories as the image wrote
// them (the overlay driver stores those as device nodes and trusted.*
// attributes, which an unprivileged reader cannot see), and lets the
// result be checked: the stream's digest must be the layer's diff ID, or
// the read ends in an error instead of io.EOF, so content changed on the
// node is never judged as the image's.
func layerTar(root, driver string, l criorecords.Layer) (io.ReadCloser, error) {
	if !storeID(l.ID) {
		return nil, fmt.Errorf("layer ID %q is not a store ID", l.ID)
	}
	want, ok := strings.CutPrefix(l.DiffDigest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("layer %s has no sha256 diff digest (%q): its content cannot be checked", l.ID, l.DiffDigest)
	}
	dir, err := diffDir(root, driver, l.ID)
	if err != nil {
		return nil, err
	}
	files, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", l.ID, err)
	}
	split := filepath.Join(root, driver+"-layers", l.ID+".tar-split.gz")
	f, err := os.Open(split)
	if err != nil {
		files.Close()
		return nil, fmt.Errorf("layer %s has no tar-split record (pulled in a form this reader does not rebuild): %w", l.ID, err)
	}
	gz, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		files.Close()
		f.Close()
		return nil, fmt.Errorf("layer %s: %s: %w", l.ID, split, err)
	}
	return &tarStream{id: l.ID, want: want, root: files, split: f, gz: gz, dec: json.NewDecoder(gz), sum: sha256.New()}, nil
}

// diffDir is where the driver keeps the layer's files.
func diffDir(root, driver, id string) (string, error) {
	switch driver {
	case "overlay", "overlay2":
		return filepath.Join(root, driver, id, "diff"), nil
	case "vfs":
		return filepath.Join(root, "vfs", "dir", id), nil
	}
	return "", fmt.Errorf("storage driver %q: layers are read from the overlay and vfs drivers only", driver)
}

func storeID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`)
}

// splitEntry is one line of a tar-split record: a segment of the tar's own
// bytes (headers, padding), or a file whose content is read from the layer.
type splitEntry struct {
	Type    int    `json:"type"`
	Name    string `json:"name"`
	NameRaw []byte `json:"name_raw"`
	Size    int64  `json:"size"`
	Payload []byte `json:"payload"`
}

const (
	splitFile    = 1
	splitSegment = 2
)

type tarStream struct {
	id, want string
	root     *os.Root
	split    *os.File
	gz       *gzip.Reader
	dec      *json.Decoder
	sum      hash.Hash

	// cur is what is being read: a segment's bytes or a file's content.
	cur     io.Reader
	curFile *os.File
	curName string
	left    int64
	done    bool
	err     error
}

func (t *tarStream) Read(p []byte) (int, error) {
	for t.err == nil {
		if t.cur != nil {
			n, err := t.cur.Read(p)
			if n > 0 {
				t.sum.Write(p[:n])
				if t.curFile != nil {
					t.left -= int64(n)
				}
				return n, nil
			}
			if err != nil && !errors.Is(err, io.EOF) {
				t.err = fmt.Errorf("layer %s, %s: %w", t.id, t.curName, err)
				break
			}
			t.endPart()
			continue
		}
		if t.done {
			t.err = t.verify()
			break
		}
		t.next()
	}
	return 0, t.err
}

// endPart closes the file just read; one shorter than its header says was
// changed after the pull.
func (t *tarStream) endPart() {
	if t.curFile != nil {
		t.curFile.Close()
		t.curFile = nil
		if t.left != 0 {
			t.err = fmt.Errorf("layer %s: %s is not the size its tar header says: the layer changed on the node", t.id, t.curName)
		}
	}
	t.cur = nil
}

func (t *tarStream) next() {
	var e splitEntry
	if err := t.dec.Decode(&e); err != nil {
		if errors.Is(err, io.EOF) {
			t.done = true
			return
		}
		t.err = fmt.Errorf("layer %s: tar-split record: %w", t.id, err)
		return
	}
	switch e.Type {
	case splitSegment:
		t.cur = strings.NewReader(string(e.Payload))
	case splitFile:
		if e.Size < 0 {
			t.err = fmt.Errorf("layer %s: tar-split record: file %q has size %d", t.id, e.Name, e.Size)
			return
		}
		if e.Size == 0 {
			return
		}
		name := e.Name
		if len(e.NameRaw) > 0 {
			name = string(e.NameRaw)
		}
		t.open(name, e.Size)
	default:
		t.err = fmt.Errorf("layer %s: tar-split record: entry type %d", t.id, e.Type)
	}
}

// open starts a file's content. os.Root keeps every path, symbolic links
// included, inside the layer's directory.
func (t *tarStream) open(name string, size int64) {
	rel := strings.TrimPrefix(filepath.Clean("/"+name), "/")
	if rel == "" {
		t.err = fmt.Errorf("layer %s: tar-split record: content for the layer's root", t.id)
		return
	}
	f, err := t.root.Open(rel)
	if err != nil {
		t.err = fmt.Errorf("layer %s: %w", t.id, err)
		return
	}
	t.curFile, t.curName, t.left = f, rel, size
	// One byte past the size: a file longer than its header is a change
	// too, seen as a short count left below zero.
	t.cur = io.LimitReader(f, size+1)
}

func (t *tarStream) verify() error {
	got := hex.EncodeToString(t.sum.Sum(nil))
	if got != t.want {
		return fmt.Errorf("layer %s rebuilt with digest sha256:%s, not its diff ID sha256:%s: the layer changed on the node", t.id, got, t.want)
	}
	return io.EOF
}

func (t *tarStream) Close() error {
	if t.curFile != nil {
		t.curFile.Close()
	}
	t.gz.Close()
	t.root.Close()
	return t.split.Close()
}
