package references

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// AnnotationNode holds the node's set on a worker pod.
const AnnotationNode = "eraser.sh/node-references"

// MaxNodeBytes bounds the node's set in the annotation, as written, under
// the API server's 256 KiB for all of a pod's annotations. A node whose set
// is larger gets Incomplete instead: its remover keeps every image an
// automatic policy would take (no node has come near: 110 pods of their own
// images, by tag and digest, compress to about 9 KiB; make bench-index).
const MaxNodeBytes = 200 * 1024

// The node set's first line says how the rest is written, so that an empty
// or missing annotation (a pod built without one) is told from a node
// without pods:
//   - nodeHeader: the lines as they are (pods built before the sets were
//     compressed, and Incomplete);
//   - nodeHeaderGzip: the lines gzip-compressed, then base64. Every watcher
//     of the worker pods (the manager's cache, kubectl, the API server's
//     storage) decodes the annotation on each of the pod's updates: at 30
//     pods a node the plain set is 7 KB a pod, the compressed one 2.7 KB
//     (digests do not compress; tags alone go to about a quarter).
const (
	nodeHeader     = "#eraser-node-references v1\n"
	nodeHeaderGzip = "#eraser-node-references v1 gzip+base64\n"
)

// Incomplete is the node set of a node whose references did not fit.
const Incomplete = nodeHeader + "#incomplete\n"

// nodeWriters are reused: a gzip writer allocates its compressor's state
// (hundreds of KiB), and the manager encodes a set for every pod of a wave.
// BestSpeed: on a 30-pod node's set it writes 4% more than BestCompression
// in a third of the time (29 against 93 µs), and a wave encodes 10,000.
var nodeWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return w
}}

// EncodeNode is the node set's annotation value: refs deduplicated and
// compressed, or Incomplete when that exceeds MaxNodeBytes.
func EncodeNode(refs []Ref) string {
	var lines bytes.Buffer
	for _, r := range Dedupe(refs) {
		line(&lines, r)
	}
	var out strings.Builder
	out.WriteString(nodeHeaderGzip)
	b64 := base64.NewEncoder(base64.StdEncoding, &out)
	zw := nodeWriters.Get().(*gzip.Writer)
	defer nodeWriters.Put(zw)
	zw.Reset(b64)
	if _, err := zw.Write(lines.Bytes()); err != nil {
		return Incomplete
	}
	if err := zw.Close(); err != nil {
		return Incomplete
	}
	if err := b64.Close(); err != nil || out.Len() > MaxNodeBytes {
		return Incomplete
	}
	return out.String()
}

// ScanNode reads a node set in either form, calling fn for each ref. It
// reports whether the set is complete: false for Incomplete.
func ScanNode(r io.Reader, fn func(Ref)) (complete bool, err error) {
	br := bufio.NewReaderSize(r, 64*1024)
	hdr, err := br.ReadString('\n')
	switch hdr {
	case nodeHeader:
		return scanNodeLines(br, fn)
	case nodeHeaderGzip:
		zr, err := gzip.NewReader(base64.NewDecoder(base64.StdEncoding, br))
		if err != nil {
			return false, fmt.Errorf("%w: the node set is not gzip and base64: %v", ErrInvalid, err)
		}
		// Damage after the stream (a second header that is not gzip) and a
		// stream cut short come out of the reads as errors.
		return scanNodeLines(bufio.NewReaderSize(zr, 64*1024), fn)
	}
	return false, fmt.Errorf("%w: the node set does not begin with %q (got %.40q, %v): the pod was built without it", ErrInvalid, strings.TrimSpace(nodeHeader), hdr, err)
}

// scanNodeLines reads the set's lines after its header.
func scanNodeLines(br *bufio.Reader, fn func(Ref)) (complete bool, err error) {
	complete = true
	for {
		l, err := br.ReadString('\n')
		if l != "" {
			switch {
			case err != nil && errors.Is(err, io.EOF):
				return complete, fmt.Errorf("%w: node set: the last line is cut short", ErrInvalid)
			case err != nil:
				return complete, fmt.Errorf("%w: reading the node set: %v", ErrInvalid, err)
			case l == "#incomplete\n":
				complete = false
			default:
				parseLine(strings.TrimSuffix(l, "\n"), fn)
			}
		}
		if errors.Is(err, io.EOF) {
			return complete, nil
		}
		if err != nil {
			return complete, fmt.Errorf("%w: reading the node set: %v", ErrInvalid, err)
		}
	}
}
