// Package plugin is `kubectl eraser`, the day-to-day commands on a
// cluster's Eraser: what runs and waits, run now, pause and resume, what a
// run would remove, a run's report, checking a configuration.
package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/api/scheme"
	"github.com/eraser-oss/eraser/internal/cli/configcheck"
	"github.com/eraser-oss/eraser/internal/cli/reportcmd"
	"github.com/eraser-oss/eraser/internal/process/version"
)

// Exit codes, as the eraser command's.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// DefaultNamespace is where the chart and deploy/eraser.yaml install Eraser.
const DefaultNamespace = "eraser-system"

// Usage is the plugin's help.
const Usage = `usage: kubectl eraser <command> [flags]

  status                        the ImageLists' and the schedule's last and next runs,
                                what runs and what waits behind what, and whether Eraser is paused
  run imagelist/<name>          run a list again now, or the schedule's run
  run schedule                  (the eraser.sh/run-now annotation)
  pause [--reason TEXT]         hold every new run and wave; running workers finish
  resume                        go on where the pause stopped
  plan                          what a run of "*" would remove on each node and in all,
                                and what it would cost to pull again (a dry run)
  report <target>               a run's per-node report (kubectl eraser report -h)
  config check -f FILE          check a configuration as the manager would load it
  migrate check                 every difference moving from upstream Eraser (or the AKS
                                Image Cleaner add-on) to this one makes; exit 3 when some,
                                4 when one must be resolved first
  migrate rollback [--apply]    what upstream's manager will do after a rollback to it, and
                                (--apply) save and delete the ImageLists it would run for real;
                                --export-reports DIR saves every run's report
  version                       which release this plugin is

Flags of the commands that reach the cluster: --kubeconfig PATH, --context NAME,
-n/--namespace NS (where Eraser runs; default eraser-system).
`

// Main runs `kubectl eraser <args>` and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, Usage)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, Usage)
		return ExitOK
	case "version":
		fmt.Fprintln(stdout, version.UserAgent("kubectl-eraser"))
		return ExitOK
	case "report":
		return reportcmd.Main(ctx, args, stdout, stderr)
	case "config":
		return configcheck.Main(args[1:], stdin, stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], Usage)
		return ExitUsage
	}
	fs := flag.NewFlagSet("kubectl eraser "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "usage: kubectl eraser %s\n", cmd.usage); fs.PrintDefaults() }
	cf := clusterFlags(fs)
	run := cmd.flags(fs)
	// Flags may come before or after the operands, as with kubectl.
	var operands []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return ExitOK
			}
			return ExitUsage
		}
		rest = fs.Args()
		if len(rest) > 0 {
			operands, rest = append(operands, rest[0]), rest[1:]
		}
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	return run(ctx, env{c: c, namespace: *cf.namespace, out: stdout, errOut: stderr, who: cf.user()}, operands)
}

// env is what a command runs with.
type env struct {
	c         client.Client
	namespace string
	out       io.Writer
	errOut    io.Writer
	// who is the kubeconfig's user, to say who paused.
	who string
}

// command is a verb: its usage line and its flags, which return the run.
type command struct {
	usage string
	flags func(*flag.FlagSet) func(context.Context, env, []string) int
}

var commands = map[string]command{
	"status":  {usage: "status [-o text|json]", flags: statusFlags},
	"run":     {usage: "run imagelist/<name> | schedule", flags: runFlags},
	"pause":   {usage: "pause [--reason TEXT]", flags: pauseFlags},
	"resume":  {usage: "resume", flags: resumeFlags},
	"plan":    {usage: "plan [--timeout 10m] [--keep] [-o text|json]", flags: planFlags},
	"migrate": {usage: migrateUsage, flags: migrateFlags},
}

type cluster struct {
	kubeconfig, context, namespace *string
}

func clusterFlags(fs *flag.FlagSet) cluster {
	c := cluster{
		kubeconfig: fs.String("kubeconfig", "", "path to the kubeconfig (default: $KUBECONFIG or ~/.kube/config)"),
		context:    fs.String("context", "", "the kubeconfig context to use"),
		namespace:  fs.String("namespace", DefaultNamespace, "the namespace Eraser runs in"),
	}
	fs.StringVar(c.namespace, "n", DefaultNamespace, "the namespace Eraser runs in (short)")
	return c
}

func (cf cluster) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *cf.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *cf.context})
}

func (cf cluster) client() (client.Client, error) {
	cfg, err := cf.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	sch, err := scheme.New()
	if err == nil {
		// migrate reads the CRDs.
		err = apiextensionsv1.AddToScheme(sch)
	}
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return c, nil
}

// user is the kubeconfig context's user name, else $USER.
func (cf cluster) user() string {
	if raw, err := cf.loader().RawConfig(); err == nil {
		name := *cf.context
		if name == "" {
			name = raw.CurrentContext
		}
		if ctx, ok := raw.Contexts[name]; ok && ctx.AuthInfo != "" {
			return ctx.AuthInfo
		}
	}
	return os.Getenv("USER")
}
