// Command remover removes images from its node through CRI: an ImageList's
// entries (--imagelist), or what the collector or scanner hands over.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/eraser-oss/eraser/internal/remover"
)

func main() {
	var cmd remover.Command
	cmd.Bind(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := cmd.Run(ctx)
	stop()
	os.Exit(code)
}
