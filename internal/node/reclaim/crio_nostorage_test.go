//go:build linux && cgo && !exclude_graphdriver_btrfs

package reclaim_test

import (
	"os"
	"testing"
)

// The CRI-O tests are in crio_test.go, which a cgo build without
// exclude_graphdriver_btrfs leaves out with containers/storage: said, not
// skipped in silence.
func TestReclaimOnCRIO(t *testing.T)                     { needsStorage(t) }
func TestReclaimNeverRacesAPull(t *testing.T)            { needsStorage(t) }
func TestReclaimRefusesAStoreItDoesNotKnow(t *testing.T) { needsStorage(t) }

func needsStorage(t *testing.T) {
	msg := t.Name() + " needs containers/storage: run with CGO_ENABLED=0 (make does) or -tags exclude_graphdriver_btrfs"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
