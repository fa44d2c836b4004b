package jobdata

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// A job's node list is plain text (one node a line, as kubectl shows it)
// when it fits in a ConfigMap; longer lists, of many nodes with long names,
// are compressed, and a compressed list still too large is split into
// parts, each its own ConfigMap. Every form is read back alike.

const (
	// keyNodesZ holds the list compressed, in binaryData: the lines of
	// keyNodes, a line "--", then those of keySkipped.
	keyNodesZ = "nodes.gz"
	// keyParts, in the list's ConfigMap, counts the ConfigMaps its
	// compressed list is split over (NodesPartName), in order.
	keyParts = "parts"
	// keyPart holds one part, in binaryData.
	keyPart = "nodes.gz.part"
	// maxParts bounds the parts a list may be read from: more than 100,000
	// nodes of the longest names need.
	maxParts = 64
	// readNodesMax bounds what a compressed list may expand to: 100,000
	// nodes of the longest names take 30 MB.
	readNodesMax = 64 << 20
)

// NodesPartName is the ConfigMap of part k (from 1) of a job's node list,
// when the list is split.
func NodesPartName(job string, k int) string { return fmt.Sprintf("%s-nodes-%d", job, k) }

// nodeLines are the plain form's two values.
func nodeLines(n Nodes) (targets, skipped string) {
	var t, s strings.Builder
	for _, x := range n.Targets {
		fmt.Fprintf(&t, "%s %s\n", x.Name, x.OS)
	}
	for _, x := range n.Skipped {
		if x.Detail != "" {
			fmt.Fprintf(&s, "%s %s %s\n", x.Name, x.Reason, x.Detail)
			continue
		}
		fmt.Fprintf(&s, "%s %s\n", x.Name, x.Reason)
	}
	return t.String(), s.String()
}

// encodeNodes is the list's ConfigMap content (data, binaryData) and, when
// it is split, its parts' binaryData, limit bytes each at most. It is pure.
func encodeNodes(n Nodes, limit int) (map[string]string, map[string][]byte, [][]byte, error) {
	targets, skipped := nodeLines(n)
	if len(targets)+len(skipped) <= limit {
		return map[string]string{keyNodes: targets, keySkipped: skipped}, nil, nil, nil
	}
	z, err := Gzip([]byte(targets + "--\n" + skipped))
	if err != nil {
		return nil, nil, nil, err
	}
	if len(z) <= limit {
		return nil, map[string][]byte{keyNodesZ: z}, nil, nil
	}
	var parts [][]byte
	for len(z) > 0 {
		k := min(limit, len(z))
		parts = append(parts, z[:k])
		z = z[k:]
	}
	if len(parts) > maxParts {
		return nil, nil, nil, fmt.Errorf("%w: the node list of %d nodes takes %d parts, more than %d", ErrTooLarge, len(n.Targets)+len(n.Skipped), len(parts), maxParts)
	}
	return map[string]string{keyParts: strconv.Itoa(len(parts))}, nil, parts, nil
}

// decodeNodes reads a list's content, whichever its form; part(k) reads
// part k of a split list. Malformed lines are skipped, as they always were.
func decodeNodes(data map[string]string, bin map[string][]byte, part func(k int) ([]byte, error)) (Nodes, error) {
	targets, skipped := data[keyNodes], data[keySkipped]
	z, compressed := bin[keyNodesZ]
	if s, split := data[keyParts]; split {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > maxParts {
			return Nodes{}, fmt.Errorf("%w: node list: %s %q, want 1 to %d", ErrInvalid, keyParts, s, maxParts)
		}
		z, compressed = nil, true
		for i := 1; i <= k; i++ {
			p, err := part(i)
			if err != nil {
				return Nodes{}, err
			}
			z = append(z, p...)
		}
	}
	if compressed {
		raw, err := Gunzip(z, readNodesMax)
		if err != nil {
			return Nodes{}, fmt.Errorf("%w: node list: %w", ErrInvalid, err)
		}
		var ok bool
		if targets, skipped, ok = strings.Cut(string(raw), "--\n"); !ok {
			return Nodes{}, fmt.Errorf("%w: node list: no \"--\" line between the targets and the skipped", ErrInvalid)
		}
	}
	var n Nodes
	for line := range strings.SplitSeq(targets, "\n") {
		if name, os, ok := strings.Cut(line, " "); ok {
			n.Targets = append(n.Targets, nodefilter.Target{Name: name, OS: podpaths.OS(os)})
		}
	}
	for line := range strings.SplitSeq(skipped, "\n") {
		if f := strings.SplitN(line, " ", 3); len(f) >= 2 {
			s := nodefilter.Skipped{Name: f[0], Reason: f[1]}
			if len(f) == 3 {
				s.Detail = f[2]
			}
			n.Skipped = append(n.Skipped, s)
		}
	}
	return n, nil
}

// CreateNodes stores a job's nodes: one "name os" line per target, one
// "name reason [detail]" line per skipped node. A split list's parts are
// created before the list's own ConfigMap, so that a list found is whole.
func CreateNodes(ctx context.Context, c client.Client, namespace string, job *eraserv1.ImageJob, n Nodes) error {
	data, bin, parts, err := encodeNodes(n, MaxSize)
	if err != nil {
		return err
	}
	for k, p := range parts {
		cm := &corev1.ConfigMap{ObjectMeta: owned(job, namespace, NodesPartName(job.Name, k+1)), Immutable: ptr.To(true),
			BinaryData: map[string][]byte{keyPart: p}}
		if err := createOwned(ctx, c, cm, job); err != nil {
			return fmt.Errorf("writing part %d of %d of the node list: %w", k+1, len(parts), err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: owned(job, namespace, NodesName(job.Name)), Immutable: ptr.To(true), Data: data, BinaryData: bin}
	return createOwned(ctx, c, cm, job)
}

// GetNodes reads a job's nodes.
func GetNodes(ctx context.Context, c client.Reader, namespace string, job *eraserv1.ImageJob) (Nodes, error) {
	cm, err := getOwned(ctx, c, namespace, NodesName(job.Name), job)
	if err != nil {
		return Nodes{}, err
	}
	return decodeNodes(cm.Data, cm.BinaryData, func(k int) ([]byte, error) {
		p, err := getOwned(ctx, c, namespace, NodesPartName(job.Name, k), job)
		if err != nil {
			return nil, err
		}
		return p.BinaryData[keyPart], nil
	})
}

// DeleteNodes deletes a job's node list with its parts, if split: the
// owner references would have the garbage collector do it too, but not on
// clusters (and test servers) without one. The parts go first, so that a
// list found is whole until it is gone.
func DeleteNodes(ctx context.Context, c client.Client, namespace string, job *eraserv1.ImageJob) error {
	cm, err := getOwned(ctx, c, namespace, NodesName(job.Name), job)
	if apierrors.IsNotFound(err) || errors.Is(err, ErrConflict) {
		// Gone, or another run's: not this job's to delete.
		return nil
	}
	if err != nil {
		return err
	}
	parts, _ := strconv.Atoi(cm.Data[keyParts])
	for k := 1; k <= min(parts, maxParts); k++ {
		p := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: NodesPartName(job.Name, k)}}
		if err := c.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ConfigMap %s: %w", p.Name, err)
		}
	}
	if err := c.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting ConfigMap %s: %w", cm.Name, err)
	}
	return nil
}

// Gzip compresses a record written as binaryData (node lists, the
// schedule's per-node record).
func Gzip(raw []byte) ([]byte, error) {
	var z bytes.Buffer
	w, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// Gunzip expands z, to limit bytes at most: a damaged or hand-made value
// cannot take the manager's memory.
func Gunzip(z []byte, limit int) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("expands past %d bytes", limit)
	}
	return raw, nil
}
