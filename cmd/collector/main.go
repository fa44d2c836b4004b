// Command collector lists its node's unused, unprotected images and hands
// them to the scanner or the remover.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/eraser-oss/eraser/internal/collector"
)

func main() {
	var cmd collector.Command
	cmd.Bind(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := cmd.Run(ctx)
	stop()
	os.Exit(code)
}
