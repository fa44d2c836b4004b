// Package version holds what the build stamps into every binary: the release
// and the registry its images are published under.
package version

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

// Set with -ldflags "-X github.com/eraser-oss/eraser/internal/process/version.Version=..."
var (
	// Version is the release; images default to this tag.
	Version = "v0.1.0-dev"
	// Commit is the source revision the binary was built from.
	Commit = "unknown"
	// DefaultRepo is the registry path the default worker images live under.
	DefaultRepo = "ghcr.io/eraser-oss"
)

// UserAgent identifies a component to the API server, e.g.
// "eraser/manager/v0.1.0 (linux/amd64) abc123".
func UserAgent(component string) string {
	return fmt.Sprintf("eraser/%s/%s (%s/%s) %s", component, Version, runtime.GOOS, runtime.GOARCH, Commit)
}

// SourceDateEpoch is the reproducible-builds convention for "the time of the
// build", which the images and the packaged chart carry: SOURCE_DATE_EPOCH,
// or the Unix epoch, so that two builds of one commit are identical.
func SourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
