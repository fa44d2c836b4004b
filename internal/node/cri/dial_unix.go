//go:build !windows

package cri

import (
	"context"
	"fmt"
	"net"

	"github.com/eraser-oss/eraser/internal/wire/endpoint"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// DefaultEndpoint is where the worker pod mounts the node's runtime socket.
const DefaultEndpoint = podpaths.CRIEndpoint

// Dialer dials addr: the runtime's CRI, and containerd's own API on the
// same socket (internal/node/containerdrecords).
func Dialer(addr endpoint.Address) (func(context.Context, string) (net.Conn, error), error) {
	if addr.Scheme != endpoint.Unix {
		return nil, fmt.Errorf("runtime endpoint %s: only unix:// sockets can be dialed here; named pipes exist on Windows", addr)
	}
	return func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", addr.Path)
	}, nil
}
