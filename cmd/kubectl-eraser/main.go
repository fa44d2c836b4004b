// Command kubectl-eraser is a kubectl plugin: with it on the PATH,
// "kubectl eraser" shows and steers a cluster's Eraser (status, run,
// pause, resume, plan, report, config check, version).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/eraser-oss/eraser/internal/cli/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := plugin.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
