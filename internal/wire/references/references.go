// Package references carries what the manager knows and the workers cannot
// see: the images the cluster's pods and workload templates reference. The
// manager writes them when a wave starts; the remover reads them, streamed,
// and keeps the images they name from every automatic policy. The package
// has no Kubernetes dependencies: it is linked into the workers.
//
// Two sets travel, in one line format ("<reference>\t<owner>\n"):
//   - the node's set, the images of the unfinished pods bound to the node,
//     gzip and base64 in the worker pod's annotation (AnnotationNode), read
//     through a downward API file: a few kilobytes at 110 pods (node.go);
//   - the cluster's set, the images of workload templates, written once per
//     wave as gzip parts in ConfigMaps named by the set's digest, so that the
//     waves of a run whose templates did not change share them, and mounted
//     into every worker pod.
//
// Each part starts with a header naming the set and its part count, so that
// a worker that finds a part missing or from another set refuses to run
// rather than judge without it. A set that could not be written whole says
// so in every part's header ("incomplete"): its worker then keeps every
// image a reference could have protected, as for a node whose set did not
// fit. A reader that predates the flag refuses such a part (its header has
// a field more), so it never judges with less than it was meant to.
package references

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Ref is one referenced image and one owner that references it.
type Ref struct {
	// Image is the reference as the object spells it ("nginx",
	// "registry:5000/app@sha256:..."), or a pod's status imageID.
	Image string
	// Owner is "<Kind> <namespace>/<name>" ("CronJob default/backup",
	// "Pod default/web-0").
	Owner string
}

// Owner formats an owner.
func Owner(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// Key of the gzip part in each cluster-set ConfigMap.
const PartKey = "references.gz"

// MaxPartBytes bounds one compressed part, under a ConfigMap's 1 MiB.
const MaxPartBytes = 900 * 1024

// MaxParts bounds the parts of one cluster set: each is a ConfigMap a wave
// writes and every worker pod mounts. 16 parts hold about 14 MiB
// compressed, 60 MiB or more of references (gzip runs at 4-8x on them):
// hundreds of thousands of workload templates. Lines past it are left out
// and the set is written incomplete.
const MaxParts = 16

// header begins every cluster-set part:
// "#eraser-references v1 <set> <k>/<n>[ incomplete]".
const (
	headerPrefix     = "#eraser-references v1 "
	headerIncomplete = "incomplete"
)

// IncompleteSet names the set written when the cluster's references could
// not be encoded at all: one part, no references, flagged incomplete. It is
// never a digest (those are hex), so its parts never share a name with a
// set's.
const IncompleteSet = "incomplete"

// Dedupe sorts refs by image and keeps one owner per image (the first by
// owner order), so that the sets and their digests do not depend on the
// order the objects were listed in.
func Dedupe(refs []Ref) []Ref {
	slices.SortFunc(refs, func(a, b Ref) int {
		if c := strings.Compare(a.Image, b.Image); c != 0 {
			return c
		}
		return strings.Compare(a.Owner, b.Owner)
	})
	return slices.CompactFunc(refs, func(a, b Ref) bool { return a.Image == b.Image })
}

// line writes one ref; references hold no tabs or newlines (imageref refuses
// them), owners are Kubernetes names; anything else is dropped, not escaped:
// an image no reference can name protects nothing.
func line(w *bytes.Buffer, r Ref) bool {
	if r.Image == "" || strings.ContainsAny(r.Image, "\t\n\r ") || strings.ContainsAny(r.Owner, "\t\n\r") {
		return false
	}
	w.WriteString(r.Image)
	w.WriteByte('\t')
	w.WriteString(r.Owner)
	w.WriteByte('\n')
	return true
}

// text is the set's lines, deduplicated, and its digest. The digest covers
// the images alone, in order: the owner written beside each is the first
// of possibly many, and changes when a pod is scheduled or a workload is
// renamed, which changes nothing a worker keeps. Sets that differ only in
// owners are the same set: a wave reuses the parts of an earlier one.
func text(refs []Ref) (bytes.Buffer, string) {
	refs = Dedupe(refs)
	var all bytes.Buffer
	h := sha256.New()
	for _, r := range refs {
		if line(&all, r) {
			h.Write([]byte(r.Image))
			h.Write([]byte{'\n'})
		}
	}
	return all, hex.EncodeToString(h.Sum(nil)[:8])
}

// SetDigest names the cluster set as Encode does, without
// compressing it: a wave whose set did not change is told in milliseconds
// and writes nothing. refs are sorted in place.
func SetDigest(refs []Ref) string {
	_, set := text(refs)
	return set
}

// Encoded is a cluster set as written: its digest, its parts (gzip) and
// whether it is whole.
type Encoded struct {
	Set   string
	Parts [][]byte
	// Dropped counts the references left out: one that alone compresses
	// to more than a part holds, or those past MaxParts. A set with any is
	// written incomplete.
	Dropped int
}

// Incomplete says whether the set was written without some references.
func (e Encoded) Incomplete() bool { return e.Dropped > 0 || e.Set == IncompleteSet }

// EncodeCluster is Encode's set and parts, for callers that need not know
// whether the set is whole (the worker tier's directories, benchmarks).
func EncodeCluster(refs []Ref, maxBytes int) (set string, parts [][]byte, err error) {
	e, err := Encode(refs, maxBytes)
	return e.Set, e.Parts, err
}

// Encode splits the cluster set into gzip parts of at most maxBytes
// (MaxPartBytes when 0), at most MaxParts of them. It does not fail on
// size: a reference that alone compresses to more than a part holds, and
// every line past the last part, are left out, and the set is flagged
// incomplete in every part's header. The digest is of the images given,
// whatever was left out: the same images encode the same way.
func Encode(refs []Ref, maxBytes int) (Encoded, error) {
	if maxBytes <= 0 {
		maxBytes = MaxPartBytes
	}
	all, set := text(refs)
	lines := bytes.SplitAfter(all.Bytes(), []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	// A first cut by raw size (gzip of image lists runs at 4-8x, so 3x the
	// limit of text), then any chunk that compresses too large is halved.
	// Measured without its header, against the limit less room for one.
	var chunks [][][]byte
	for start, raw := 0, 0; start < len(lines); {
		end := start
		for raw = 0; end < len(lines) && (end == start || raw+len(lines[end]) <= 3*maxBytes); end++ {
			raw += len(lines[end])
		}
		chunks = append(chunks, lines[start:end])
		start = end
	}
	const headerRoom = 128
	dropped := 0
	for k := 0; k < len(chunks); k++ {
		data, err := gz(chunks[k])
		if err != nil {
			return Encoded{}, fmt.Errorf("compressing part %d of the cluster's references: %w", k+1, err)
		}
		if len(data) <= maxBytes-headerRoom {
			continue
		}
		if len(chunks[k]) < 2 {
			// One reference larger than a part: no image can be named by
			// it (a reference is at most a few hundred bytes), but the set
			// is no longer what the index holds.
			dropped++
			chunks = slices.Delete(chunks, k, k+1)
			k--
			continue
		}
		half := len(chunks[k]) / 2
		chunks = slices.Insert(chunks, k+1, chunks[k][half:])
		chunks[k] = chunks[k][:half]
		k--
	}
	if len(chunks) > MaxParts {
		for _, c := range chunks[MaxParts:] {
			dropped += len(c)
		}
		chunks = chunks[:MaxParts]
	}
	if len(chunks) == 0 {
		chunks = [][][]byte{nil}
	}
	parts, err := withHeaders(set, chunks, dropped > 0)
	if err != nil {
		return Encoded{}, err
	}
	return Encoded{Set: set, Parts: parts, Dropped: dropped}, nil
}

// EncodeIncomplete is the set written when the cluster's references cannot
// be written at all: one part without references, flagged incomplete, named
// IncompleteSet.
func EncodeIncomplete() (Encoded, error) {
	parts, err := withHeaders(IncompleteSet, [][][]byte{nil}, true)
	if err != nil {
		return Encoded{}, err
	}
	return Encoded{Set: IncompleteSet, Parts: parts}, nil
}

// withHeaders compresses each chunk behind its header, once the count is
// known.
func withHeaders(set string, chunks [][][]byte, incomplete bool) ([][]byte, error) {
	flag := ""
	if incomplete {
		flag = " " + headerIncomplete
	}
	parts := make([][]byte, 0, len(chunks))
	for k, chunk := range chunks {
		hdr := []byte(fmt.Sprintf("%s%s %d/%d%s\n", headerPrefix, set, k+1, len(chunks), flag))
		data, err := gz(append([][]byte{hdr}, chunk...))
		if err != nil {
			return nil, fmt.Errorf("compressing part %d of the cluster's references: %w", k+1, err)
		}
		parts = append(parts, data)
	}
	return parts, nil
}

func gz(lines [][]byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if _, err := w.Write(l); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrInvalid marks a set that cannot be trusted: a part missing, from
// another set, or unreadable. The remover refuses to run on it.
var ErrInvalid = errors.New("invalid references")

// parseLine calls fn for a well-formed line; others are skipped (a
// comment, or damage the header checks catch for the cluster set).
func parseLine(l string, fn func(Ref)) {
	img, owner, ok := strings.Cut(l, "\t")
	if !ok || img == "" || strings.HasPrefix(l, "#") {
		return
	}
	fn(Ref{Image: img, Owner: owner})
}

// ClusterReader reads the parts of one cluster set, in any order, and
// checks that together they are the whole set.
type ClusterReader struct {
	set        string
	total      int
	seen       map[int]bool
	incomplete bool
}

// Scan reads one part (gzip), calling fn for each ref.
func (c *ClusterReader) Scan(name string, r io.Reader, fn func(Ref)) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%w: part %s: %w", ErrInvalid, name, err)
	}
	br := bufio.NewReaderSize(zr, 64*1024)
	hdr, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("%w: part %s: no header: %w", ErrInvalid, name, err)
	}
	set, k, n, incomplete, err := parseHeader(strings.TrimSuffix(hdr, "\n"))
	if err != nil {
		return fmt.Errorf("%w: part %s: %w", ErrInvalid, name, err)
	}
	c.incomplete = c.incomplete || incomplete
	switch {
	case c.seen == nil:
		c.set, c.total, c.seen = set, n, map[int]bool{}
	case set != c.set || n != c.total:
		return fmt.Errorf("%w: part %s is of set %s (%d parts), the others of %s (%d parts)", ErrInvalid, name, set, n, c.set, c.total)
	}
	if c.seen[k] {
		return fmt.Errorf("%w: part %d of set %s twice", ErrInvalid, k, set)
	}
	c.seen[k] = true
	for {
		l, err := br.ReadString('\n')
		if err == nil {
			parseLine(strings.TrimSuffix(l, "\n"), fn)
			continue
		}
		if errors.Is(err, io.EOF) && l == "" {
			return nil
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: part %s: the last line is cut short", ErrInvalid, name)
		}
		return fmt.Errorf("%w: part %s: %w", ErrInvalid, name, err)
	}
}

// Done checks that every part was read.
func (c *ClusterReader) Done() error {
	if c.seen == nil {
		return fmt.Errorf("%w: no part of the cluster set was found", ErrInvalid)
	}
	if len(c.seen) != c.total {
		return fmt.Errorf("%w: %d of the %d parts of set %s were found", ErrInvalid, len(c.seen), c.total, c.set)
	}
	return nil
}

// Set is the set read, once Done.
func (c *ClusterReader) Set() string { return c.set }

// Complete says whether the set was written whole, once Done: false when
// any part says it is incomplete.
func (c *ClusterReader) Complete() bool { return !c.incomplete }

func parseHeader(h string) (set string, k, n int, incomplete bool, err error) {
	rest, ok := strings.CutPrefix(h, headerPrefix)
	f := strings.Fields(rest)
	if len(f) == 3 && f[2] == headerIncomplete {
		f, incomplete = f[:2], true
	}
	if !ok || len(f) != 2 {
		return "", 0, 0, false, fmt.Errorf("header %.60q is not %q<set> <k>/<n>[ %s]", h, headerPrefix, headerIncomplete)
	}
	ks, ns, ok := strings.Cut(f[1], "/")
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || k < 1 || k > n {
		return "", 0, 0, false, fmt.Errorf("header %.60q: part %q is not <k>/<n>", h, f[1])
	}
	return f[0], k, n, incomplete, nil
}
