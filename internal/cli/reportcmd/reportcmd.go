// Package reportcmd is `kubectl eraser report`: it prints a job's per-node
// report (what each node removed, kept and why, and failed to remove) from
// the ConfigMap shards the manager wrote, long after the worker pods are
// gone.
package reportcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/api/scheme"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// Exit codes, as the eraser CLI's.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Usage is the plugin's help.
const Usage = `usage: kubectl eraser report <imagelist|imagejob>/<name> [--node NODE] [-o text|json]
       kubectl eraser report <name>   (an ImageJob, else an ImageList of that name)

Prints what each node removed, kept (and why) and failed to remove in the
job's run (an ImageList's: its last run), from the report the manager keeps
for manager.imageJob.cleanup.keepReportFor after the run.
`

// Output is the -o json form.
type Output struct {
	Job      string `json:"job"`
	Phase    string `json:"phase"`
	DryRun   bool   `json:"dryRun,omitempty"`
	Complete bool   `json:"complete"`
	// OmittedNodes were left out of a report that reached its size cap.
	OmittedNodes int `json:"omittedNodes,omitempty"`
	// Note says what the report cannot: an ImageList's newer run that was
	// deleted before it finished, and so has none.
	Note    string            `json:"note,omitempty"`
	Summary Summary           `json:"summary"`
	Nodes   []nodereport.Node `json:"nodes"`
}

// Summary counts the nodes shown by what happened on them.
type Summary struct {
	// Succeeded nodes' workers ran and did not fail.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// NotStarted nodes never had a worker pod: the run ended first, or
	// gave up waiting for the node.
	NotStarted int `json:"notStarted"`
	Skipped    int `json:"skipped"`
}

// Summarize counts the nodes.
func Summarize(nodes []nodereport.Node) Summary {
	var s Summary
	for _, n := range nodes {
		kind, _ := n.Kind()
		switch {
		case n.Failed:
			s.Failed++
		case kind == nodereport.KindSkipped:
			s.Skipped++
		case n.Reason != "":
			// NotStarted, or a reason of a newer manager's: a node that
			// did not fail has a reason only if its worker did not run.
			s.NotStarted++
		default:
			s.Succeeded++
		}
	}
	return s
}

// String is the summary's nonzero counts, for the text form.
func (s Summary) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{s.Succeeded, "succeeded"}, {s.Failed, "failed"}, {s.NotStarted, "not started"}, {s.Skipped, "skipped"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

// Main runs `kubectl eraser <args>` and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "report" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, Usage)
			return ExitOK
		}
		fmt.Fprint(stderr, Usage)
		return ExitUsage
	}
	fs := flag.NewFlagSet("kubectl eraser report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage); fs.PrintDefaults() }
	node := fs.String("node", "", "print only this node")
	output := fs.String("o", "text", "output format: text or json")
	kubeconfig := fs.String("kubeconfig", "", "path to the kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "the kubeconfig context to use")
	// Flags may follow the target, as with kubectl.
	var target string
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
			if target != "" {
				fmt.Fprintf(stderr, "one target, got %q and %q\n", target, rest[0])
				return ExitUsage
			}
			target, rest = rest[0], rest[1:]
		}
	}
	if target == "" || (*output != "text" && *output != "json") {
		fs.Usage()
		return ExitUsage
	}
	c, err := newClient(*kubeconfig, *kubeContext)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	out, err := Load(ctx, c, target, *node)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return ExitFailed
		}
		return ExitOK
	}
	Print(stdout, out)
	return ExitOK
}

func newClient(kubeconfig, kubeContext string) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	sch, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return c, nil
}
