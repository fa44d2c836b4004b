//go:build !windows

package ctrdrecords

import (
	"context"
	"fmt"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// snapshotPlugin is the plugin type of containerd's snapshotters, the same
// in 1.6, 1.7 and 2.x.
const snapshotPlugin = "io.containerd.snapshotter.v1"

// Read reads every namespace's records from the containerd at address (its
// socket: the node's CRI socket is containerd's own).
func Read(ctx context.Context, address string) (Records, error) {
	c, err := containerd.New(address)
	if err != nil {
		return Records{}, fmt.Errorf("connecting to containerd at %s: %w", address, err)
	}
	defer c.Close()
	snapshotters, err := LoadedSnapshotters(ctx, c)
	if err != nil {
		return Records{}, err
	}
	names, err := c.NamespaceService().List(ctx)
	if err != nil {
		return Records{}, fmt.Errorf("listing containerd's namespaces: %w", err)
	}
	var out Records
	for _, name := range names {
		ns, err := readNamespace(namespaces.WithNamespace(ctx, name), c, name, snapshotters)
		if err != nil {
			return Records{}, fmt.Errorf("namespace %s: %w", name, err)
		}
		out.Namespaces = append(out.Namespaces, ns)
	}
	return out, nil
}

// LoadedSnapshotters are the snapshotters containerd loaded (not those
// that failed to start, as btrfs does on another filesystem).
func LoadedSnapshotters(ctx context.Context, c *containerd.Client) ([]string, error) {
	resp, err := c.IntrospectionService().Plugins(ctx, "type=="+snapshotPlugin)
	if err != nil {
		return nil, fmt.Errorf("listing containerd's snapshotters: %w", err)
	}
	var out []string
	for _, p := range resp.Plugins {
		if p.InitErr == nil {
			out = append(out, p.ID)
		}
	}
	return out, nil
}

func readNamespace(ctx context.Context, c *containerd.Client, name string, snapshotters []string) (Namespace, error) {
	ns := Namespace{Name: name}
	imgs, err := c.ImageService().List(ctx)
	if err != nil {
		return ns, fmt.Errorf("listing images: %w", err)
	}
	for _, img := range imgs {
		ns.Images = append(ns.Images, Image{Name: img.Name, Target: img.Target.Digest.String(), Labels: img.Labels})
	}
	err = c.ContentStore().Walk(ctx, func(info content.Info) error {
		ns.Content = append(ns.Content, Blob{Digest: info.Digest.String(), Bytes: info.Size, Labels: info.Labels})
		return nil
	})
	if err != nil {
		return ns, fmt.Errorf("listing content: %w", err)
	}
	for _, sn := range snapshotters {
		svc := c.SnapshotService(sn)
		err := svc.Walk(ctx, func(ctx context.Context, info snapshots.Info) error {
			usage, err := svc.Usage(ctx, info.Name)
			// Removed between the walk and its usage: gone, not ours.
			if errdefs.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("usage of snapshot %s: %w", info.Name, err)
			}
			ns.Snapshots = append(ns.Snapshots, Snapshot{Snapshotter: sn, Key: info.Name, Parent: info.Parent,
				Active: info.Kind != snapshots.KindCommitted, Bytes: usage.Size, Labels: info.Labels})
			return nil
		})
		if err != nil {
			return ns, fmt.Errorf("listing snapshotter %s: %w", sn, err)
		}
	}
	ls, err := c.LeasesService().List(ctx)
	if err != nil {
		return ns, fmt.Errorf("listing leases: %w", err)
	}
	for _, l := range ls {
		res, err := c.LeasesService().ListResources(ctx, l)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return ns, fmt.Errorf("lease %s: %w", l.ID, err)
		}
		lease := Lease{ID: l.ID, CreatedAt: l.CreatedAt, Labels: l.Labels}
		for _, r := range res {
			lease.Resources = append(lease.Resources, Resource{Type: r.Type, ID: r.ID})
		}
		ns.Leases = append(ns.Leases, lease)
	}
	cs, err := c.ContainerService().List(ctx)
	if err != nil {
		return ns, fmt.Errorf("listing containers: %w", err)
	}
	for _, ct := range cs {
		ns.Containers = append(ns.Containers, Container{ID: ct.ID, Image: ct.Image, Snapshotter: ct.Snapshotter, SnapshotKey: ct.SnapshotKey, Labels: ct.Labels})
	}
	return ns, nil
}
