package handoff

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"
)

// MaxSocketPath is the longest AF_UNIX path: sun_path holds 108 bytes
// including the terminating NUL. Checked up front on both sides, so a long
// path fails with this message and not an opaque "bind: invalid argument".
const MaxSocketPath = 107

// dialRetry is how often a writer retries until the reader listens.
const dialRetry = 50 * time.Millisecond

// Socket is the AF_UNIX transport (the Windows default). The reader listens
// and the writer dials, the inverse of FIFOs.
type Socket struct{}

var _ Transport = Socket{}

// Name implements Transport.
func (Socket) Name() string { return "unix-socket" }

func checkSocketPath(path string) error {
	if len(path) > MaxSocketPath {
		return fmt.Errorf("hand-off socket path %q is %d bytes; AF_UNIX allows at most %d", path, len(path), MaxSocketPath)
	}
	return nil
}

// SendImages implements Transport.
func (s Socket) SendImages(ctx context.Context, path string, images []Image) error {
	data, err := Encode(images)
	if err != nil {
		return err
	}
	return s.send(ctx, path, data)
}

func (Socket) send(ctx context.Context, path string, data []byte) error {
	conn, err := dialUntil(ctx, path)
	if err != nil {
		return err
	}
	_, err = conn.Write(data)
	return closeWith(conn, err)
}

// dialUntil retries until the peer listens. Errors are not classified: on
// Windows a missing socket is WSAECONNREFUSED, which matches neither ENOENT
// nor ECONNREFUSED, so there is no reliable "not yet" to test for.
func dialUntil(ctx context.Context, path string) (net.Conn, error) {
	if err := checkSocketPath(path); err != nil {
		return nil, err
	}
	var d net.Dialer
	for {
		if err := checkSocket(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
			return &ctxConn{Conn: conn, stop: stop}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a listener on %s: %w", path, ctx.Err())
		case <-time.After(dialRetry):
		}
	}
}

type ctxConn struct {
	net.Conn
	stop func() bool
}

func (c *ctxConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// ReceiveImages implements Transport.
func (Socket) ReceiveImages(ctx context.Context, path string) ([]Image, error) {
	l, err := listen(path)
	if err != nil {
		return nil, err
	}
	data, err := acceptRead(ctx, l, MaxPayload)
	if err = closeWith(l, err); err != nil {
		return nil, fmt.Errorf("receiving images on %s: %w", path, err)
	}
	return Decode(data)
}

func listen(path string) (*net.UnixListener, error) {
	if err := checkSocketPath(path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("publishing hand-off endpoint %s: %w", path, err)
	}
	// Go removes the socket file on Close because it created it; a file
	// someone else created is never touched.
	l.SetUnlinkOnClose(true)
	return l, nil
}

// acceptRead takes one connection and reads it to EOF.
func acceptRead(ctx context.Context, l *net.UnixListener, limit int64) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = l.SetDeadline(time.Now()) })
	defer stop()
	conn, err := l.Accept()
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	stopConn := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stopConn()
	data, err := readAll(conn, limit)
	return data, ctxErr(ctx, closeWith(conn, err))
}

// PublishCompletion implements Transport.
func (Socket) PublishCompletion(path string) (Completion, error) {
	l, err := listen(path)
	if err != nil {
		return nil, err
	}
	return &socketCompletion{l: l, path: path}, nil
}

// SignalCompletion implements Transport.
func (s Socket) SignalCompletion(ctx context.Context, path string) error {
	if err := checkSocketPath(path); err != nil {
		return err
	}
	// Existence is decided by lstat: a dial to a missing socket on Windows
	// reports WSAECONNREFUSED, not ENOENT.
	if err := checkSocket(path); err != nil {
		return fmt.Errorf("completion endpoint %s: %w", path, err)
	}
	return s.send(ctx, path, []byte(CompleteToken))
}

// checkSocket refuses a path that holds anything but a socket, a link to
// one included: the name is in a directory every container of the pod can
// write (see openEndpoint). connect(2) has no way to refuse a link, so a
// link made between this check and the dial is still followed; what it
// can reach is another listening socket, given a few bytes of hand-off,
// never a file. On Windows, where this transport is the workers', every
// container of the pod is the host's SYSTEM anyway.
func checkSocket(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSocket == 0 {
		return &fs.PathError{Op: "connect", Path: path, Err: notEndpoint(path, "a socket")}
	}
	return nil
}

type socketCompletion struct {
	mu   sync.Mutex
	l    *net.UnixListener
	path string
}

func (c *socketCompletion) Wait(ctx context.Context) error {
	c.mu.Lock()
	l := c.l
	c.mu.Unlock()
	if l == nil {
		return fmt.Errorf("completion endpoint %s: %w", c.path, net.ErrClosed)
	}
	data, err := acceptRead(ctx, l, maxCompletion)
	if err != nil {
		return fmt.Errorf("waiting for completion on %s: %w", c.path, err)
	}
	return checkToken(data)
}

// Close clears the listener before closing it, so a second call finds
// nothing to do and reports success.
func (c *socketCompletion) Close() error {
	c.mu.Lock()
	l := c.l
	c.l = nil
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	if err := l.Close(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
