// Command kubectl-eraser is a kubectl plugin: with it on the PATH,
// "kubectl eraser report <imagelist|imagejob>/<name>" prints a run's
// per-node report.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/eraser-oss/eraser/internal/reportcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := reportcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
