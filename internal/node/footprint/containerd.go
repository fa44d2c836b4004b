package footprint

import (
	"context"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/ctrdrecords"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// Containerd reads the containerd at addr (its unix socket, or its named
// pipe on Windows): every namespace, since a blob another namespace's
// image holds is not freed by removing the kubelet's.
func Containerd(addr endpoint.Address, criNamespace string) Reader {
	return func(ctx context.Context) (Store, error) {
		r, err := ctrdrecords.Read(ctx, addr)
		if err != nil {
			return nil, err
		}
		return ContainerdStore(r, criNamespace), nil
	}
}

// ContainerdStore is the store of records already read.
func ContainerdStore(r ctrdrecords.Records, criNamespace string) Store {
	return containerdStore{g: ctrdrecords.NewGraph(r), ns: criNamespace}
}

type containerdStore struct {
	g  *ctrdrecords.Graph
	ns string
}

// Exclusive counts the CRI images' records in the kubelet's namespace: a
// CRI image is every record named by its ID, a tag or a repo digest.
func (s containerdStore) Exclusive(images []cri.Image) uint64 {
	var refs []ctrdrecords.Ref
	for _, img := range images {
		for _, name := range append(append([]string{img.ID}, img.Tags...), img.Digests...) {
			refs = append(refs, ctrdrecords.Ref{Kind: ctrdrecords.ImageRef, Namespace: s.ns, ID: name})
		}
	}
	return s.g.Exclusive(refs)
}

func (s containerdStore) Total() uint64 { return s.g.Total() }
