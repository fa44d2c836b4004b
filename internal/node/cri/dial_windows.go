//go:build windows

package cri

import (
	"context"
	"fmt"
	"net"

	"github.com/Microsoft/go-winio"

	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// DefaultEndpoint is containerd's named pipe on Windows nodes; HostProcess
// pods reach it directly, without a mount.
const DefaultEndpoint = "npipe://./pipe/containerd-containerd"

// Dialer dials addr: the runtime's CRI, and containerd's own API on the
// same named pipe (internal/node/containerdrecords).
func Dialer(addr endpoint.Address) (func(context.Context, string) (net.Conn, error), error) {
	switch addr.Scheme {
	case endpoint.NamedPipe:
		return func(ctx context.Context, _ string) (net.Conn, error) {
			return winio.DialPipeContext(ctx, addr.DialPath())
		}, nil
	case endpoint.Unix:
		return func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr.Path)
		}, nil
	}
	return nil, fmt.Errorf("runtime endpoint %s: unsupported scheme", addr)
}
