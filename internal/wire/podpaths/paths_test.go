package podpaths

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPaths(t *testing.T) {
	got := map[OS][]string{}
	for _, os := range []OS{Linux, Windows} {
		got[os] = []string{SharedData(os), ImageListDir(os), ImageListFile(os), ExclusionDir(os), ConfigDir(os), StateDir(os)}
	}
	want := map[OS][]string{
		Linux:   {"/run/eraser.sh/shared-data", "/run/eraser.sh/imagelist", "/run/eraser.sh/imagelist/images", "/run/eraser.sh/exclusions", "/run/eraser.sh/config", "/var/lib/eraser"},
		Windows: {`C:\run\eraser.sh\shared-data`, `C:\run\eraser.sh\imagelist`, `C:\run\eraser.sh\imagelist\images`, `C:\run\eraser.sh\exclusions`, `C:\run\eraser.sh\config`, `C:\ProgramData\eraser`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
