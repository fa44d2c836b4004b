//go:build linux && cgo && !exclude_graphdriver_btrfs

package reclaim_test

import (
	"os"
	"testing"
)

// TestReclaimOnCRIO is in crio_test.go, which a cgo build without
// exclude_graphdriver_btrfs leaves out with containers/storage: said, not
// skipped in silence.
func TestReclaimOnCRIO(t *testing.T) {
	msg := "TestReclaimOnCRIO needs containers/storage: run with CGO_ENABLED=0 (make does) or -tags exclude_graphdriver_btrfs"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
