package nodecmd

// "eraser node list --leftovers": what image removals left on the node's
// runtime, beyond the CRI's sight.

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
)

// DefaultImageStore is CRI-O's image store (containers/storage's root).
const DefaultImageStore = "/var/lib/containers/storage"

func listLeftovers(ctx context.Context, client *cri.Client, imageStore string, ages reclaim.Ages, asJSON bool, now time.Time, out io.Writer) error {
	found, err := reclaim.Find(ctx, client, imageStore, ages, now)
	if err != nil {
		return err
	}
	if asJSON {
		if found == nil {
			found = []leftover.Leftover{}
		}
		return writeJSON(out, found)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tSIZE\tWHY")
	for _, l := range found {
		ns := l.Namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Kind, ns, l.Name, bytesize.Format(l.Bytes), l.Why)
	}
	return tw.Flush()
}
