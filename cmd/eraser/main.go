// Command eraser is Eraser's command-line tool. "eraser node list|prune"
// works on one node's runtime directly, with no cluster; "eraser config
// check" validates a configuration as the manager would load it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eraser-oss/eraser/internal/cli/configcheck"
	"github.com/eraser-oss/eraser/internal/cli/nodecmd"
	"github.com/eraser-oss/eraser/internal/process/version"
)

const usage = `usage: eraser node list|prune [flags]   (eraser node -h for more)
       eraser config check -f FILE         (eraser config -h for more)
       eraser version
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	arg := ""
	if len(os.Args) > 1 {
		arg = os.Args[1]
	}
	code := nodecmd.ExitUsage
	switch arg {
	case "-h", "--help", "help":
		fmt.Print(usage)
		code = nodecmd.ExitOK
	case "version":
		fmt.Println(version.UserAgent("cli"))
		code = nodecmd.ExitOK
	case "node":
		code = nodecmd.Main(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "config":
		code = configcheck.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	default:
		fmt.Fprint(os.Stderr, usage)
	}
	stop()
	os.Exit(code)
}
