//go:build !windows

package handoff

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is how often a reader looks for a FIFO its writer has not
// created yet.
const pollInterval = 50 * time.Millisecond

// FIFO is the named-pipe transport (the Linux default, as upstream). The
// writer creates the FIFO and the reader waits for it to appear.
type FIFO struct{}

var _ Transport = FIFO{}

// Name implements Transport.
func (FIFO) Name() string { return "fifo" }

// SendImages implements Transport.
func (f FIFO) SendImages(ctx context.Context, path string, images []Image) error {
	data, err := Encode(images)
	if err != nil {
		return err
	}
	return f.send(ctx, path, data)
}

func (FIFO) send(ctx context.Context, path string, data []byte) error {
	if err := mkfifo(path, 0o644, true); err != nil {
		return err
	}
	return writeFIFO(ctx, path, data)
}

// ReceiveImages implements Transport.
func (FIFO) ReceiveImages(ctx context.Context, path string) ([]Image, error) {
	if err := waitForFIFO(ctx, path); err != nil {
		return nil, err
	}
	data, err := readFIFO(ctx, path, MaxPayload)
	if err != nil {
		return nil, fmt.Errorf("receiving images on %s: %w", path, err)
	}
	return Decode(data)
}

// PublishCompletion implements Transport.
func (FIFO) PublishCompletion(path string) (Completion, error) {
	if err := mkfifo(path, 0o600, false); err != nil {
		return nil, err
	}
	return &fifoCompletion{path: path}, nil
}

// SignalCompletion implements Transport. The endpoint is the waiter's,
// in a directory the waiter can write: it is opened only as a FIFO, never
// through a link (openEndpoint), and a missing one fails the open with
// ENOENT.
func (FIFO) SignalCompletion(ctx context.Context, path string) error {
	return writeFIFO(ctx, path, []byte(CompleteToken))
}

type fifoCompletion struct {
	mu     sync.Mutex
	path   string
	closed bool
}

func (c *fifoCompletion) Wait(ctx context.Context) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("completion endpoint %s: %w", c.path, fs.ErrClosed)
	}
	data, err := readFIFO(ctx, c.path, maxCompletion)
	if err != nil {
		return fmt.Errorf("waiting for completion on %s: %w", c.path, err)
	}
	return checkToken(data)
}

// Close removes the FIFO this side created, so the same endpoint can be
// published again; a second call, or a FIFO already gone, is not an error.
func (c *fifoCompletion) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// mkfifo creates a FIFO. A writer may find one it created before a restart
// of its container; anything else at the path is an error.
func mkfifo(path string, mode uint32, reuse bool) error {
	err := unix.Mkfifo(path, mode)
	if errors.Is(err, fs.ErrExist) && reuse {
		if st, serr := os.Lstat(path); serr == nil && st.Mode()&fs.ModeNamedPipe != 0 {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("creating hand-off FIFO %s: %w", path, err)
	}
	return nil
}

func waitForFIFO(ctx context.Context, path string) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		st, err := os.Lstat(path)
		if err == nil {
			if st.Mode()&fs.ModeNamedPipe == 0 {
				return fmt.Errorf("hand-off endpoint %s is not a FIFO", path)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to appear: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}

func writeFIFO(ctx context.Context, path string, data []byte) error {
	f, err := openFIFO(ctx, path, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("opening %s for writing: %w", path, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetDeadline(time.Now()) })
	defer stop()
	_, err = f.Write(data)
	if err = ctxErr(ctx, closeWith(f, err)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func readFIFO(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := openFIFO(ctx, path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("opening %s for reading: %w", path, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetDeadline(time.Now()) })
	defer stop()
	data, err := readAll(f, limit)
	return data, ctxErr(ctx, closeWith(f, err))
}

// openPoll is how often a writer retries opening a FIFO that has no
// reader yet, and how long a reader's poll for a writer lasts between two
// looks at its context.
const openPoll = 20 * time.Millisecond

// openFIFO opens a FIFO without ever blocking in open(2): a blocked open
// cannot be interrupted, so waiting in one would leave a goroutine (and a
// descriptor) behind whenever the wait is given up, for ever if the FIFO is
// removed meanwhile. Both ends are opened non-blocking and wait for their
// peer by polling, checking ctx between polls. The descriptor stays
// non-blocking, so its reads and writes go through the runtime's poller and
// end with ctx (writeFIFO and readFIFO set a deadline).
func openFIFO(ctx context.Context, path string, flag int) (*os.File, error) {
	if flag&os.O_WRONLY != 0 {
		return openWriter(ctx, path)
	}
	return openReader(ctx, path)
}

// openWriter retries: a non-blocking open for writing fails with ENXIO
// until a reader has the FIFO open.
func openWriter(ctx context.Context, path string) (*os.File, error) {
	t := time.NewTicker(openPoll)
	defer t.Stop()
	for {
		fd, err := openEndpoint(path, unix.O_WRONLY)
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if !errors.Is(err, unix.ENXIO) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// openReader opens at once (a non-blocking open for reading always
// succeeds), then waits for a writer. Linux reports no hang-up to a reader
// that opened before any writer did, so poll(2) returns only once a writer
// has written or come and gone; a read before that would see end-of-file.
func openReader(ctx context.Context, path string) (*os.File, error) {
	fd, err := openEndpoint(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if err := ctx.Err(); err != nil {
			_ = unix.Close(fd)
			return nil, err
		}
		n, err := unix.Poll(fds, int(openPoll/time.Millisecond))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			_ = unix.Close(fd)
			return nil, fmt.Errorf("waiting for a writer on %s: %w", path, err)
		case n > 0:
			return os.NewFile(uintptr(fd), path), nil
		}
	}
}

// openEndpoint opens the FIFO at path, non-blocking, and refuses anything
// else. Every container of the pod can write the shared directory, so the
// name is the peer's to replace at any moment: a link there, followed by a
// remover that may write the runtime's store, would have the token written
// over a file of that store. So a link is never followed (O_NOFOLLOW: the
// shared directory is a mount point, and its last element is the only one a
// peer can replace) and the kind is checked on the descriptor opened, not
// on the name, which could change between a check and the open. Errors of
// the open itself are a *fs.PathError carrying the errno (ENXIO: a FIFO
// with no reader yet; ENOENT: no endpoint).
func openEndpoint(path string, mode int) (int, error) {
	fd, err := unix.Open(path, mode|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ELOOP) {
		return -1, &fs.PathError{Op: "open", Path: path, Err: notEndpoint(path, "a FIFO")}
	}
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		_ = unix.Close(fd)
		return -1, &fs.PathError{Op: "open", Path: path, Err: notEndpoint(path, "a FIFO")}
	}
	return fd, nil
}
