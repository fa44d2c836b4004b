package config

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds the decisions about values upstream Eraser accepted that
// do not fit this project's schema as they are: each is either read with the
// effect it had upstream, with a warning where that effect is none, or
// refused with the reason upstream's own workers could not use it either.

// upstreamLogLevels are the manager.logLevel values upstream documented
// beyond LogLevels: zap's levels above error.
var upstreamLogLevels = []string{"dpanic", "panic", "fatal"}

// logLevel decides manager.logLevel. Upstream never read the key (its
// manager's --log-level flag set every level) and documented zap's seven
// levels; the key has no effect here either, so upstream's extra levels are
// accepted with a warning saying so, and an empty value is zap's default,
// info.
func logLevel(p *field.Path, s string) (level, warning string, err *field.Error) {
	switch {
	case s == "":
		return "info", "", nil
	case slices.Contains(LogLevels, s):
		return s, "", nil
	case slices.Contains(upstreamLogLevels, s):
		return s, fmt.Sprintf("%q is accepted as upstream Eraser documented it; this key has no effect, as upstream: the manager's --log-level flag (%s) sets the level of the manager and its workers",
			s, strings.Join(LogLevels, ", ")), nil
	}
	return "", "", field.NotSupported(p, s, append(slices.Clone(LogLevels), upstreamLogLevels...))
}

// removerDisabledWarning is the warning for components.remover.enabled:
// false. Upstream's remover had no such key and dropped it, so removals went
// on; they go on here too, and the warning says how to remove nothing.
const removerDisabledWarning = "false has no effect, as with upstream Eraser, which had no such key: the remover always runs. " +
	"To remove nothing, delete the ImageLists and set components.collector.enabled: false"

// runtimeAddress reads a manager.runtime.address the way upstream's worker
// pods used it: upstream mounted the URL's path from the host and ignored
// its host part. An address whose host is localhost therefore keeps
// working, with a warning. Any other host was the first directory of a
// relative path ("unix://run/containerd/containerd.sock"), which upstream
// silently cut off, mounting a path with no socket on every node, so it is
// refused with the absolute address it most likely meant. tcp:// was
// accepted by upstream's parser and usable by none of its workers, which
// dial local sockets only (their pods even mounted an empty host path); it
// stays refused, saying so.
func runtimeAddress(s string) (canonical, warning string, err error) {
	u, perr := url.Parse(s)
	if perr == nil && u.Scheme == "tcp" {
		return "", "", fmt.Errorf("%q: workers dial the runtime's local unix:// socket; upstream Eraser accepted tcp:// here, but its workers could not dial it and failed on every node", s)
	}
	if perr == nil && u.Scheme == "unix" && u.Host != "" {
		if u.Host != "localhost" {
			return "", "", fmt.Errorf("%q: a unix socket's address has no host, and upstream Eraser mounted %q, dropping %q; did you mean %q?",
				s, path.Clean("/"+u.Path), u.Host, "unix:///"+u.Host+u.Path)
		}
		warning = fmt.Sprintf("the host %q is ignored, as upstream Eraser ignored it: the socket is %s", u.Host, path.Clean("/"+u.Path))
		s = "unix://" + u.Path
	}
	return s, warning, nil
}
