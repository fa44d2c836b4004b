package footprint

import (
	"context"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// Containerd reads the containerd at addr (its unix socket, or its named
// pipe on Windows): every namespace, since a blob another namespace's
// image holds is not freed by removing the kubelet's.
func Containerd(addr endpoint.Address, criNamespace string) Reader {
	return func(ctx context.Context) (Store, error) {
		r, err := containerdrecords.Read(ctx, addr)
		if err != nil {
			return nil, err
		}
		return ContainerdStore(r, criNamespace), nil
	}
}

// ContainerdStore is the store of records already read.
func ContainerdStore(r containerdrecords.Records, criNamespace string) Store {
	return containerdStore{g: containerdrecords.NewGraph(r), ns: criNamespace}
}

type containerdStore struct {
	g  *containerdrecords.Graph
	ns string
}

// Exclusive counts the CRI images' records in the kubelet's namespace: a
// CRI image is every record named by its ID, a tag or a repo digest.
func (s containerdStore) Exclusive(images []cri.Image) uint64 {
	var refs []containerdrecords.Ref
	for _, img := range images {
		for _, name := range append(append([]string{img.ID}, img.Tags...), img.Digests...) {
			refs = append(refs, containerdrecords.Ref{Kind: containerdrecords.ImageRef, Namespace: s.ns, ID: name})
		}
	}
	return s.g.Exclusive(refs)
}

func (s containerdStore) Total() uint64 { return s.g.Total() }
