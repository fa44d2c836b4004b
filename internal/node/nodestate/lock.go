package nodestate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// LockFileName is the lock's file in the state directory. It is a file of
// its own, never renamed or deleted, because Save replaces the state file
// by a rename: a lock on the state file itself would stay on the old inode
// (Linux) or make the rename fail (Windows).
const LockFileName = FileName + ".lock"

// DefaultLockWait is how long a worker waits for another to release the
// node's state. The lock is held only to load, merge and save the file:
// milliseconds for tens of thousands of images, seconds for an fsync on a
// busy disk. A holder that keeps it for minutes is stuck (a process hung on
// a failing disk keeps its lock until it dies), and waiting longer would
// only hold the worker pod until the run's timeout without saying why.
const DefaultLockWait = 2 * time.Minute

// ErrLockTimeout is wrapped by the error of a wait for the lock that ran out.
var ErrLockTimeout = errors.New("the node's state is still locked by another Eraser worker or \"eraser node prune\" (--state-lock-wait bounds the wait)")

// Polling, not a blocking lock call: neither flock nor LockFileEx takes a
// deadline, and a blocked call cannot be given up without killing the
// thread. The interval grows to lockPollMax so a long wait costs little.
const (
	lockPollMin = 5 * time.Millisecond
	lockPollMax = 100 * time.Millisecond
)

// LockPath is the lock file in dir.
func LockPath(dir string) string { return filepath.Join(dir, LockFileName) }

// Lock is an exclusive lock on a node's state, held by one open file. The
// operating system releases it when the file is closed, including when the
// process dies, so a killed worker never leaves the node locked.
type Lock struct {
	f *os.File
}

// AcquireLock takes the exclusive lock on the state in dir, creating dir
// and the lock file, waiting up to wait (DefaultLockWait when zero or less)
// for another holder to release it.
func AcquireLock(dir string, wait time.Duration) (*Lock, error) {
	if wait <= 0 {
		wait = DefaultLockWait
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node state directory: %w", err)
	}
	path := LockPath(dir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node state lock: %w", err)
	}
	start := time.Now()
	for poll := lockPollMin; ; poll = min(2*poll, lockPollMax) {
		ok, err := tryLock(f)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("node state lock %s: %w", path, err)
		}
		if ok {
			return &Lock{f: f}, nil
		}
		waited := time.Since(start)
		if waited >= wait {
			_ = f.Close()
			return nil, fmt.Errorf("node state lock %s: waited %s: %w", path, waited.Round(time.Millisecond), ErrLockTimeout)
		}
		time.Sleep(min(poll, wait-waited))
	}
}

// Release gives the lock up. Releasing a nil or released lock does nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	err := unlock(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("node state lock %s: release: %w", f.Name(), err)
	}
	return nil
}

// Locked is the state in a directory, loaded under its lock: nothing else
// reads or writes it until Save or Release.
type Locked struct {
	*State
	dir  string
	lock *Lock
}

// LoadLocked takes the lock on the state in dir (waiting as AcquireLock
// does) and loads the state. The caller must Save or Release it; a worker
// that dies first releases it with its process.
func LoadLocked(dir string, wait time.Duration) (*Locked, error) {
	lock, err := AcquireLock(dir, wait)
	if err != nil {
		return nil, err
	}
	s, err := Load(dir)
	if err != nil {
		_ = lock.Release()
		return nil, err
	}
	return &Locked{State: s, dir: dir, lock: lock}, nil
}

// Save writes the state and releases the lock, whether or not the write
// succeeded.
func (l *Locked) Save() error {
	err := Save(l.dir, l.State)
	return errors.Join(err, l.lock.Release())
}

// Release gives the lock up without writing.
func (l *Locked) Release() error { return l.lock.Release() }

// Update applies fn to the state in dir under its lock and saves it: one
// read-modify-write that no other holder interleaves with.
func Update(dir string, wait time.Duration, fn func(*State)) error {
	l, err := LoadLocked(dir, wait)
	if err != nil {
		return err
	}
	fn(l.State)
	return l.Save()
}
