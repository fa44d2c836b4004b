package nodestate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiskFull: the platform's full-disk error is told apart however it is
// wrapped (as Save wraps it), and other errors are not taken for it.
func TestDiskFull(t *testing.T) {
	cases := map[string]struct {
		err  error
		want bool
	}{
		"the platform's":       {err: diskFullError, want: true},
		"wrapped as Save does": {err: fmt.Errorf("node state x: %w", &fs.PathError{Op: "write", Path: "x", Err: diskFullError}), want: true},
		"joined":               {err: errors.Join(errors.New("release"), diskFullError), want: true},
		"permission":           {err: os.ErrPermission},
		"nil":                  {},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		got[name], want[name] = DiskFull(tc.err), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DiskFull (-want +got):\n%s", diff)
	}
}
