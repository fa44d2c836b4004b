package references

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The references directory of a worker pod: the node's set as a downward
// API file, the cluster set's parts as ConfigMap files.
const (
	NodeDir    = "node"
	NodeFile   = "references"
	ClusterDir = "cluster"
	partSuffix = ".gz"
)

// PartFile is the file name of cluster part k (from 1) in ClusterDir.
func PartFile(k int) string { return fmt.Sprintf("part-%d%s", k, partSuffix) }

// Stats is what a worker read.
type Stats struct {
	// Set names the cluster set; Parts is how many parts it had.
	Set   string
	Parts int
	// Cluster and Node count the lines read.
	Cluster, Node int
	// NodeComplete is false when the node's set did not fit (Incomplete).
	NodeComplete bool
	// ClusterComplete is false when the cluster set was written without
	// some of its references (its parts say incomplete).
	ClusterComplete bool
}

// ReadDir reads a worker's references directory, calling fn for each ref
// with whether it is the node's. A directory without the node file or
// without every part of one cluster set is an error wrapping ErrInvalid:
// the caller must not judge without them.
func ReadDir(dir string, fn func(r Ref, onNode bool)) (Stats, error) {
	var st Stats
	f, err := os.Open(filepath.Join(dir, NodeDir, NodeFile))
	if err != nil {
		return st, fmt.Errorf("%w: the node's set: %w", ErrInvalid, err)
	}
	st.NodeComplete, err = ScanNode(f, func(r Ref) { st.Node++; fn(r, true) })
	_ = f.Close()
	if err != nil {
		return st, err
	}
	entries, err := os.ReadDir(filepath.Join(dir, ClusterDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("%w: the cluster set: %w", ErrInvalid, err)
	}
	var names []string
	for _, e := range entries {
		// ConfigMap volumes hold their files through "..data" links.
		if strings.HasSuffix(e.Name(), partSuffix) && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	var cr ClusterReader
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, ClusterDir, name))
		if err != nil {
			return st, fmt.Errorf("%w: the cluster set: %w", ErrInvalid, err)
		}
		err = cr.Scan(name, f, func(r Ref) { st.Cluster++; fn(r, false) })
		_ = f.Close()
		if err != nil {
			return st, err
		}
	}
	if err := cr.Done(); err != nil {
		return st, err
	}
	st.Set, st.Parts, st.ClusterComplete = cr.Set(), cr.total, cr.Complete()
	return st, nil
}

// WriteDir lays out a references directory as a worker pod sees it (the
// node file and the cluster set's parts), for the worker tier's tests: it
// is exported because they run the remover binary on a directory made
// without a manager.
func WriteDir(dir string, node []Ref, cluster []Ref) error {
	if err := os.MkdirAll(filepath.Join(dir, NodeDir), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, NodeDir, NodeFile), []byte(EncodeNode(node)), 0o644); err != nil {
		return err
	}
	_, parts, err := EncodeCluster(cluster, 0)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, ClusterDir), 0o755); err != nil {
		return err
	}
	for k, p := range parts {
		if err := os.WriteFile(filepath.Join(dir, ClusterDir, PartFile(k+1)), p, 0o644); err != nil {
			return err
		}
	}
	return nil
}
