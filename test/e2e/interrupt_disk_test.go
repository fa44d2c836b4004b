//go:build linux

package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/eraser-oss/eraser/internal/node/diskusage"
)

// How much of the image filesystem a node's store takes, in all and by
// directory.

// diskOf is the disk the files under path take, each inode once.
func diskOf(path string) uint64 {
	var n uint64
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
				seen[st.Ino] = true
				n += uint64(st.Blocks) * 512
			}
		}
		return nil
	})
	return n
}

func usedBytes(t *testing.T, root string) uint64 {
	t.Helper()
	u, err := diskusage.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	return u.Used()
}

// usageByDir is the disk each directory depth levels under root takes, at
// least min, for a message.
func usageByDir(root string, depth int, least uint64) map[string]string {
	sizes := map[string]uint64{}
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		rel, _ := filepath.Rel(root, p)
		parts := strings.SplitN(rel, string(os.PathSeparator), depth+1)
		if len(parts) > depth {
			parts = parts[:depth]
		}
		sizes[strings.Join(parts, "/")] += uint64(st.Blocks) * 512
		return nil
	})
	out := map[string]string{}
	for k, v := range sizes {
		if v >= least {
			out[k] = human(v)
		}
	}
	return out
}
