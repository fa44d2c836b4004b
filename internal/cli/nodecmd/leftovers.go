package nodecmd

// "eraser node list --leftovers": what image removals left on the node's
// runtime, beyond the CRI's sight.

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/eraser-oss/eraser/internal/cli/bytesize"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/ctrdrecords"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// criNamespace is the containerd namespace of the kubelet's images.
const criNamespace = "k8s.io"

// leaseAge: a pull's or an import's lease lives minutes; one a day old
// holds what nothing finished.
const leaseAge = 24 * time.Hour

func listLeftovers(ctx context.Context, client *cri.Client, asJSON bool, now time.Time, out io.Writer) error {
	if client.RuntimeName != "containerd" {
		return fmt.Errorf("finding leftovers on %s is not supported yet (containerd only)", client.RuntimeName)
	}
	if client.Address.Scheme != endpoint.Unix {
		return fmt.Errorf("finding leftovers needs containerd's unix socket, not %s", client.Address)
	}
	records, err := ctrdrecords.Read(ctx, client.Address.Path)
	if err != nil {
		return err
	}
	found := leftover.Containerd(records, leftover.Options{CRINamespace: criNamespace, LeaseAge: leaseAge, Now: now})
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
