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
	"github.com/eraser-oss/eraser/internal/node/storagerecords"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// criNamespace is the containerd namespace of the kubelet's images.
const criNamespace = "k8s.io"

// defaultLeaseAge: a pull's or an import's lease lives minutes; one a day
// old holds what nothing finished. defaultRecordAge is the same margin for
// CRI-O's records, which a pull writes before the image that holds them.
const (
	defaultLeaseAge  = 24 * time.Hour
	defaultRecordAge = time.Hour
)

// leftoverAges are the margins that keep work in progress from being
// taken for leftovers.
type leftoverAges struct{ lease, record time.Duration }

// DefaultImageStore is CRI-O's image store (containers/storage's root).
const DefaultImageStore = "/var/lib/containers/storage"

func listLeftovers(ctx context.Context, client *cri.Client, imageStore string, ages leftoverAges, asJSON bool, now time.Time, out io.Writer) error {
	found, err := findLeftovers(ctx, client, imageStore, ages, now)
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

// findLeftovers reads the runtime's own records: containerd's through its
// socket (the CRI socket is containerd's own), CRI-O's from its image
// store, with the containers and sandboxes its CRI lists.
func findLeftovers(ctx context.Context, client *cri.Client, imageStore string, ages leftoverAges, now time.Time) ([]leftover.Leftover, error) {
	switch client.RuntimeName {
	case "containerd":
		if client.Address.Scheme != endpoint.Unix {
			return nil, fmt.Errorf("finding leftovers needs containerd's unix socket, not %s", client.Address)
		}
		records, err := ctrdrecords.Read(ctx, client.Address.Path)
		if err != nil {
			return nil, err
		}
		return leftover.Containerd(records, leftover.Options{CRINamespace: criNamespace, LeaseAge: ages.lease, Now: now}), nil
	case "cri-o":
		records, err := storagerecords.Read(imageStore)
		if err != nil {
			return nil, err
		}
		live, err := liveIDs(ctx, client)
		if err != nil {
			return nil, err
		}
		sizeOf := func(layer string) int64 {
			n, _ := storagerecords.LayerDiskBytes(imageStore, records.Driver, layer)
			return n
		}
		return leftover.CRIO(records, leftover.CRIOOptions{Live: live, SizeOf: sizeOf, MinAge: ages.record, Now: now}), nil
	default:
		return nil, fmt.Errorf("finding leftovers on %s is not supported (containerd and CRI-O)", client.RuntimeName)
	}
}

// liveIDs are the containers and pod sandboxes CRI-O lists.
func liveIDs(ctx context.Context, client *cri.Client) (map[string]bool, error) {
	containers, err := client.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
	sandboxes, err := client.PodSandboxIDs(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, c := range containers {
		live[c.ID] = true
	}
	for _, id := range sandboxes {
		live[id] = true
	}
	return live, nil
}
