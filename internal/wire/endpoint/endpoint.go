// Package endpoint parses container runtime addresses: unix:// sockets on
// Linux nodes and npipe:// named pipes on Windows nodes. The manager validates
// configuration with it and the node workers dial what it returns, so both
// sides agree on what an address means.
package endpoint

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
)

// Scheme is the transport of a runtime address.
type Scheme string

const (
	// Unix is a unix domain socket, e.g. unix:///run/containerd/containerd.sock.
	Unix Scheme = "unix"
	// NamedPipe is a Windows named pipe, e.g. npipe://./pipe/containerd-containerd.
	NamedPipe Scheme = "npipe"
)

// Address is a parsed runtime address.
type Address struct {
	Scheme Scheme
	// Path is the socket's absolute path for Unix, and the pipe's name
	// (without \\.\pipe\) for NamedPipe.
	Path string
}

// Parse accepts unix:///abs/path, and npipe://./pipe/name or the four-slash
// form npipe:////./pipe/name that containerd's documentation uses. Other
// schemes, tcp:// included, are refused: node workers dial local endpoints only.
func Parse(s string) (Address, error) {
	if strings.TrimSpace(s) != s || s == "" {
		return Address{}, errors.New("must be a non-empty address without spaces")
	}
	u, err := url.Parse(s)
	if err != nil {
		return Address{}, fmt.Errorf("not a URL: %w", err)
	}
	switch Scheme(u.Scheme) {
	case Unix:
		if u.Host != "" || !path.IsAbs(u.Path) || u.RawQuery != "" || u.Fragment != "" {
			return Address{}, fmt.Errorf("%q: want unix:///absolute/path/to.sock", s)
		}
		return Address{Scheme: Unix, Path: path.Clean(u.Path)}, nil
	case NamedPipe:
		p := u.Path
		if u.Host == "" {
			// npipe:////./pipe/name parses with an empty host.
			p = strings.TrimPrefix(p, "//.")
		} else if u.Host != "." {
			return Address{}, fmt.Errorf("%q: only local pipes are supported, want npipe://./pipe/<name>", s)
		}
		name, ok := strings.CutPrefix(p, "/pipe/")
		if !ok || name == "" || strings.ContainsAny(name, `/\`) {
			return Address{}, fmt.Errorf("%q: want npipe://./pipe/<name>", s)
		}
		return Address{Scheme: NamedPipe, Path: name}, nil
	case "":
		return Address{}, fmt.Errorf("%q: missing scheme, want unix:// or npipe://", s)
	default:
		return Address{}, fmt.Errorf("%q: unsupported scheme %q, want unix:// or npipe://", s, u.Scheme)
	}
}

// String is the canonical form of the address.
func (a Address) String() string {
	if a.Scheme == NamedPipe {
		return "npipe://./pipe/" + a.Path
	}
	return string(a.Scheme) + "://" + a.Path
}

// DialPath is what the OS dials: the socket path, or \\.\pipe\<name>.
func (a Address) DialPath() string {
	if a.Scheme == NamedPipe {
		return `\\.\pipe\` + a.Path
	}
	return a.Path
}

// IsLoopbackHost tells whether host ([host]:port, host:port or host) is this
// machine: localhost, or an address in 127.0.0.0/8 or ::1. Plain HTTP to a
// registry is allowed only there.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
