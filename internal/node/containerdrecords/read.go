package containerdrecords

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	introspectionapi "github.com/containerd/containerd/api/services/introspection/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	namespacesapi "github.com/containerd/containerd/api/services/namespaces/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/opencontainers/go-digest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// snapshotPlugin is the plugin type of containerd's snapshotters, the same
// in 1.6, 1.7 and 2.x.
const snapshotPlugin = "io.containerd.snapshotter.v1"

// Conn is a connection to containerd's API, through the clients its API
// module generates (the ones its own client package wraps): the remover
// carries these few rather than that whole package, which would grow its
// binary by a quarter and its memory with it.
type Conn struct {
	cc *grpc.ClientConn
}

// Dial connects to the containerd at addr: the node's CRI endpoint is
// containerd's own API too, a unix socket on Linux and the named pipe
// npipe://./pipe/containerd-containerd on Windows, dialled as the CRI
// client dials it.
func Dial(addr endpoint.Address) (*Conn, error) {
	dial, err := cri.Dialer(addr)
	if err != nil {
		return nil, err
	}
	// passthrough: the dialer knows the address; no resolver must rewrite it.
	cc, err := grpc.NewClient("passthrough:///containerd", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return nil, fmt.Errorf("connecting to containerd at %s: %w", addr, err)
	}
	return &Conn{cc: cc}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.cc.Close() }

// InNamespace is ctx speaking for namespace ns, in place of any other:
// containerd reads the namespace from this gRPC header.
func InNamespace(ctx context.Context, ns string) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(namespaceHeader, ns)
	return metadata.NewOutgoingContext(ctx, md)
}

// namespaceHeader is containerd's gRPC header of the namespace.
const namespaceHeader = "containerd-namespace"

// IsNotFound tells containerd's answer that a record is not there.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// Images is containerd's image service.
func (c *Conn) Images() imagesapi.ImagesClient { return imagesapi.NewImagesClient(c.cc) }

// Leases is containerd's lease service.
func (c *Conn) Leases() leasesapi.LeasesClient { return leasesapi.NewLeasesClient(c.cc) }

// Containers is containerd's container service.
func (c *Conn) Containers() containersapi.ContainersClient {
	return containersapi.NewContainersClient(c.cc)
}

// Snapshots is containerd's snapshot service.
func (c *Conn) Snapshots() snapshotsapi.SnapshotsClient { return snapshotsapi.NewSnapshotsClient(c.cc) }

// NamespaceNames are containerd's namespaces.
func (c *Conn) NamespaceNames(ctx context.Context) ([]string, error) {
	resp, err := namespacesapi.NewNamespacesClient(c.cc).List(ctx, &namespacesapi.ListNamespacesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing containerd's namespaces: %w", err)
	}
	var out []string
	for _, n := range resp.GetNamespaces() {
		out = append(out, n.GetName())
	}
	return out, nil
}

// HasSnapshot tells whether snapshotter sn holds a snapshot in ctx's
// namespace.
func (c *Conn) HasSnapshot(ctx context.Context, sn string) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Snapshots().List(ctx, &snapshotsapi.ListSnapshotsRequest{Snapshotter: sn})
	if err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(resp.GetInfo()) > 0 {
			return true, nil
		}
	}
}

// WriteBlob writes data into the content store as ref, under the lease
// ctx names: a stat, a write and a commit, as containerd's own writer
// does.
func (c *Conn) WriteBlob(ctx context.Context, ref string, data []byte) error {
	stream, err := contentapi.NewContentClient(c.cc).Write(ctx)
	if err != nil {
		return err
	}
	dgst := digest.FromBytes(data).String()
	size := int64(len(data))
	for _, req := range []*contentapi.WriteContentRequest{
		{Action: contentapi.WriteAction_STAT, Ref: ref, Total: size, Expected: dgst},
		{Action: contentapi.WriteAction_WRITE, Offset: 0, Data: data},
		{Action: contentapi.WriteAction_COMMIT, Total: size, Offset: size, Expected: dgst},
	} {
		if err := stream.Send(req); err != nil {
			return err
		}
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
	return stream.CloseSend()
}

// Read reads every namespace's records from the containerd at addr.
func Read(ctx context.Context, addr endpoint.Address) (Records, error) {
	c, err := Dial(addr)
	if err != nil {
		return Records{}, err
	}
	defer c.Close()
	return c.Read(ctx)
}

// Read reads every namespace's records.
func (c *Conn) Read(ctx context.Context) (Records, error) {
	snapshotters, err := c.LoadedSnapshotters(ctx)
	if err != nil {
		return Records{}, err
	}
	resp, err := namespacesapi.NewNamespacesClient(c.cc).List(ctx, &namespacesapi.ListNamespacesRequest{})
	if err != nil {
		return Records{}, fmt.Errorf("listing containerd's namespaces: %w", err)
	}
	var out Records
	for _, n := range resp.GetNamespaces() {
		ns, err := c.readNamespace(InNamespace(ctx, n.GetName()), n.GetName(), snapshotters)
		if err != nil {
			return Records{}, fmt.Errorf("namespace %s: %w", n.GetName(), err)
		}
		out.Namespaces = append(out.Namespaces, ns)
	}
	return out, nil
}

// LoadedSnapshotters are the snapshotters containerd loaded (not those
// that failed to start, as btrfs does on another filesystem).
func (c *Conn) LoadedSnapshotters(ctx context.Context) ([]string, error) {
	resp, err := introspectionapi.NewIntrospectionClient(c.cc).Plugins(ctx, &introspectionapi.PluginsRequest{Filters: []string{"type==" + snapshotPlugin}})
	if err != nil {
		return nil, fmt.Errorf("listing containerd's snapshotters: %w", err)
	}
	var out []string
	for _, p := range resp.GetPlugins() {
		if p.GetInitErr() == nil {
			out = append(out, p.GetID())
		}
	}
	return out, nil
}

func (c *Conn) readNamespace(ctx context.Context, name string, snapshotters []string) (Namespace, error) {
	ns := Namespace{Name: name}
	imgs, err := c.Images().List(ctx, &imagesapi.ListImagesRequest{})
	if err != nil {
		return ns, fmt.Errorf("listing images: %w", err)
	}
	for _, img := range imgs.GetImages() {
		ns.Images = append(ns.Images, Image{Name: img.GetName(), Target: img.GetTarget().GetDigest(), Labels: gcLabels(img.GetLabels())})
	}
	if err := c.readContent(ctx, &ns); err != nil {
		return ns, err
	}
	for _, sn := range snapshotters {
		if err := c.readSnapshots(ctx, sn, &ns); err != nil {
			return ns, err
		}
	}
	ls, err := c.Leases().List(ctx, &leasesapi.ListRequest{})
	if err != nil {
		return ns, fmt.Errorf("listing leases: %w", err)
	}
	for _, l := range ls.GetLeases() {
		res, err := c.Leases().ListResources(ctx, &leasesapi.ListResourcesRequest{ID: l.GetID()})
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return ns, fmt.Errorf("lease %s: %w", l.GetID(), err)
		}
		lease := Lease{ID: l.GetID(), CreatedAt: l.GetCreatedAt().AsTime(), Labels: l.GetLabels()}
		for _, r := range res.GetResources() {
			lease.Resources = append(lease.Resources, Resource{Type: r.GetType(), ID: r.GetID()})
		}
		ns.Leases = append(ns.Leases, lease)
	}
	cs, err := c.Containers().List(ctx, &containersapi.ListContainersRequest{})
	if err != nil {
		return ns, fmt.Errorf("listing containers: %w", err)
	}
	for _, ct := range cs.GetContainers() {
		ns.Containers = append(ns.Containers, Container{ID: ct.GetID(), Image: ct.GetImage(), Snapshotter: ct.GetSnapshotter(), SnapshotKey: ct.GetSnapshotKey(), Labels: gcLabels(ct.GetLabels())})
	}
	return ns, nil
}

func (c *Conn) readContent(ctx context.Context, ns *Namespace) error {
	stream, err := contentapi.NewContentClient(c.cc).List(ctx, &contentapi.ListContentRequest{})
	if err != nil {
		return fmt.Errorf("listing content: %w", err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing content: %w", err)
		}
		for _, info := range resp.GetInfo() {
			ns.Content = append(ns.Content, Blob{Digest: info.GetDigest(), Bytes: info.GetSize(), Labels: gcLabels(info.GetLabels())})
		}
	}
}

func (c *Conn) readSnapshots(ctx context.Context, sn string, ns *Namespace) error {
	client := snapshotsapi.NewSnapshotsClient(c.cc)
	stream, err := client.List(ctx, &snapshotsapi.ListSnapshotsRequest{Snapshotter: sn})
	if err != nil {
		return fmt.Errorf("listing snapshotter %s: %w", sn, err)
	}
	var infos []*snapshotsapi.Info
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("listing snapshotter %s: %w", sn, err)
		}
		infos = append(infos, resp.GetInfo()...)
	}
	for _, info := range infos {
		usage, err := client.Usage(ctx, &snapshotsapi.UsageRequest{Snapshotter: sn, Key: info.GetName()})
		// Removed between the listing and its usage: gone, not ours.
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("usage of snapshot %s: %w", info.GetName(), err)
		}
		ns.Snapshots = append(ns.Snapshots, Snapshot{Snapshotter: sn, Key: info.GetName(), Parent: info.GetParent(),
			Active: info.GetKind() != snapshotsapi.Kind_COMMITTED, Bytes: usage.GetSize(), Labels: gcLabels(info.GetLabels())})
	}
	return nil
}

// gcLabels keeps the garbage collector's labels, the only ones what holds
// what depends on: a node's records carry many others (the CRI's, the
// distribution sources of every blob), and the remover reads them all
// within its memory limit.
func gcLabels(labels map[string]string) map[string]string {
	var out map[string]string
	for k, v := range labels {
		if strings.HasPrefix(k, gcLabelPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
