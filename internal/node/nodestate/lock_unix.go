//go:build unix

package nodestate

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes an flock on f without waiting. flock, not fcntl: fcntl
// locks belong to the process, so two goroutines of one worker (or a test)
// would both get it, and closing any descriptor of the file drops it.
func tryLock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		default:
			return false, err
		}
	}
}

func unlock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
