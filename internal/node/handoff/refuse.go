package handoff

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNotEndpoint is a hand-off path that holds something other than the
// endpoint its transport makes there: a link, a regular file. Such a path is
// never followed, read or written.
var ErrNotEndpoint = errors.New("refused: not a hand-off endpoint")

// notEndpoint says what is at path instead of the endpoint (want: "a FIFO",
// "a socket"). What is there is looked at again by name, for the message
// alone: the refusal was decided on what was opened.
func notEndpoint(path, want string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("it is not %s: %w", want, ErrNotEndpoint)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return fmt.Errorf("it is a symbolic link (to %q), which is never followed, not %s: %w", target, want, ErrNotEndpoint)
	}
	return fmt.Errorf("it is %s, not %s: %w", kindOf(st.Mode()), want, ErrNotEndpoint)
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "an irregular file"
}
