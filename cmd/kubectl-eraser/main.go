// Command kubectl-eraser is a kubectl plugin: with it on the PATH,
// "kubectl eraser report <imagelist|imagejob>/<name>" prints a run's
// per-node report, and "kubectl eraser version" which release it is.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eraser-oss/eraser/internal/cli/reportcmd"
	"github.com/eraser-oss/eraser/internal/process/version"
)

func main() {
	// As the node command: a published binary says which release it is.
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Println(version.UserAgent("kubectl-eraser"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := reportcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
