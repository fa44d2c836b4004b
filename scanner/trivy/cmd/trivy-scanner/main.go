// Command trivy-scanner is the scheduled worker pod's scanner: it judges
// the collector's images with Trivy and hands the non-compliant ones to
// the remover; see internal/app.
package main

import (
	"context"

	xos "github.com/aquasecurity/trivy/pkg/x/os"

	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/app"
)

// command removes, when the run ends, the temporary directory Trivy makes
// once per process for what it unpacks of the images: a node that runs the
// scanner with a host /tmp (or a test that runs it hundreds of times)
// would otherwise keep one per run.
type command struct{ app.Command }

func (c *command) Run(ctx context.Context) int {
	defer func() { _ = xos.Cleanup() }()
	return c.Command.Run(ctx)
}

func main() { worker.Main(&command{}) }
