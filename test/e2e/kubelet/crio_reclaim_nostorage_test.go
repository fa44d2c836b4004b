//go:build cgo && !exclude_graphdriver_btrfs

package kubelet

import "testing"

// crioReclaim needs containers/storage, which a cgo build without
// exclude_graphdriver_btrfs leaves out: a failure, not a skip.
func crioReclaim(t *testing.T) {
	t.Fatal("reclaiming on the CRI-O node needs containers/storage: run with CGO_ENABLED=0 (make does) or -tags exclude_graphdriver_btrfs")
}
