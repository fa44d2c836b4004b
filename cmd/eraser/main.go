// Command eraser is Eraser's command-line tool. "eraser node list|prune"
// works on one node's runtime directly, with no cluster.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eraser-oss/eraser/internal/nodecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if len(os.Args) < 2 || os.Args[1] != "node" {
		fmt.Fprintln(os.Stderr, "usage: eraser node list|prune [flags]   (eraser node list -h for more)")
		os.Exit(2)
	}
	code := nodecmd.Main(ctx, os.Args[2:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
