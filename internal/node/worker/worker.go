// Package worker holds what the node workers (collector, remover) share:
// their common flags, the CRI connection, exclusion lists and pprof.
package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/exclusion"
	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/process/logging"
	"github.com/eraser-oss/eraser/internal/process/memlimit"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Flags are the flags every worker takes, upstream's first.
type Flags struct {
	LogLevel        logging.Level
	EnablePprof     bool
	PprofPort       int
	RuntimeEndpoint string
	ExclusionDir    string
	SharedDir       string
	// HandoffTimeout bounds every wait for a peer in the pod.
	HandoffTimeout time.Duration
	// Transport carries hand-offs; the platform's default unless set.
	Transport handoff.Transport
}

// Start returns the worker's logger after setting up pprof and the
// hand-off transport.
func (f *Flags) Start(component string) *slog.Logger {
	log := f.Logger(component)
	f.StartPprof(log)
	if f.Transport == nil {
		f.Transport = handoff.Default()
	}
	return log
}

// Bind registers the flags; defaults come from the environment where
// upstream reads it.
func (f *Flags) Bind(fs *flag.FlagSet) {
	f.LogLevel.Bind(fs)
	fs.BoolVar(&f.EnablePprof, "enable-pprof", false, "serve pprof on localhost:--pprof-port")
	fs.IntVar(&f.PprofPort, "pprof-port", 6060, "pprof port")
	def := os.Getenv(cri.EnvRuntimeEndpoint)
	if def == "" {
		def = cri.DefaultEndpoint
	}
	fs.StringVar(&f.RuntimeEndpoint, "runtime-endpoint", def, "CRI endpoint: unix:///path or npipe://./pipe/name (env "+cri.EnvRuntimeEndpoint+")")
	fs.StringVar(&f.ExclusionDir, "exclusion-dir", ".", "directory holding exclude-<configmap> directories of exclusion lists (the pod passes "+podpaths.ExclusionDir(NodeOS)+")")
	fs.StringVar(&f.SharedDir, "shared-dir", podpaths.SharedData(NodeOS), "directory shared by the pod's workers for hand-offs")
	fs.DurationVar(&f.HandoffTimeout, "handoff-timeout", workerdefaults.HandoffTimeout, "how long to wait for a peer in the pod (the scanner, the collector, the remover) before failing")
}

// WaitFor bounds one wait for a peer by HandoffTimeout. Its error, once the
// wait failed, says which peer and how long, when the timeout ended it.
func (f *Flags) WaitFor(ctx context.Context, peer, what string, wait func(ctx context.Context) error) error {
	timeout := f.HandoffTimeout
	if timeout <= 0 {
		timeout = workerdefaults.HandoffTimeout
	}
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errHandoffTimeout)
	defer cancel()
	err := wait(wctx)
	if err != nil && errors.Is(context.Cause(wctx), errHandoffTimeout) && ctx.Err() == nil {
		return fmt.Errorf("%s %s within %v (--handoff-timeout): %w", what, peer, timeout, err)
	}
	return err
}

var errHandoffTimeout = errors.New("hand-off timeout")

// Logger is the worker's JSON logger on stderr.
func (f *Flags) Logger(component string) *slog.Logger {
	log := logging.NewWorker(os.Stderr, f.LogLevel, component)
	if node := os.Getenv("NODE_NAME"); node != "" {
		log = log.With("node", node)
	}
	return log
}

// StartPprof serves pprof on localhost when enabled.
func (f *Flags) StartPprof(log *slog.Logger) {
	if !f.EnablePprof {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	addr := net.JoinHostPort("localhost", strconv.Itoa(f.PprofPort))
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil {
			log.Error("pprof server stopped", "addr", addr, "error", err)
		}
	}()
}

// Dial connects to the runtime.
func (f *Flags) Dial(ctx context.Context, log *slog.Logger) (*cri.Client, error) {
	c, err := cri.Dial(ctx, f.RuntimeEndpoint, cri.DefaultTimeouts)
	if err != nil {
		return nil, err
	}
	log.Debug("connected to runtime", "endpoint", f.RuntimeEndpoint, "runtime", c.RuntimeName, "version", c.RuntimeVersion)
	return c, nil
}

// Exclusions reads the exclusion lists.
func (f *Flags) Exclusions(log *slog.Logger) ([]imageref.Pattern, error) {
	pats, notes, err := exclusion.ReadDir(f.ExclusionDir)
	if err != nil {
		return nil, fmt.Errorf("exclusion lists: %w", err)
	}
	for _, n := range notes {
		log.Warn("exclusion list read differently from upstream Eraser", "key", n.Key, "entry", n.Entry, "reading", n.Reading)
	}
	if len(pats) > 0 {
		names := make([]string, len(pats))
		for i, p := range pats {
			names[i] = p.String()
		}
		log.Info("exclusion lists read", "patterns", names)
	}
	return pats, nil
}

// Command is a worker binary.
type Command interface {
	Bind(fs *flag.FlagSet)
	Run(ctx context.Context) int
}

// Main parses the flags, runs the command until SIGTERM or an interrupt and
// exits with its code.
func Main(cmd Command) {
	memlimit.Apply()
	cmd.Bind(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := cmd.Run(ctx)
	stop()
	os.Exit(code)
}

// NodeFailedError is a run that completed with failed removals.
type NodeFailedError struct {
	// Failed and Attempted count removals.
	Failed, Attempted int
	// First is the first failure: the target and its error.
	First string
}

func (e *NodeFailedError) Error() string {
	return fmt.Sprintf("%d of %d removals failed; first: %s", e.Failed, e.Attempted, e.First)
}

// ExitCode is the exit code for a run that ended with err.
func ExitCode(err error) int {
	var nf *NodeFailedError
	switch {
	case err == nil:
		return workerresult.ExitOK
	case errors.As(err, &nf):
		return workerresult.ExitNodeFailed
	}
	return workerresult.ExitCouldNotRun
}

// Finish writes the run's summary to the termination message file, logs it,
// and returns the exit code (ExitCode of err). The error goes into the
// summary's Error, which the manager shows for a failed node.
func Finish(log *slog.Logger, summaryFile string, summary workerresult.Summary, err error) int {
	summary.Node = os.Getenv("NODE_NAME")
	summary.PeakRSSBytes = memlimit.PeakRSS()
	if err != nil {
		log.Error(summary.Component+" failed", "error", err, "exitCode", ExitCode(err))
		summary.Error = err.Error()
	}
	if werr := workerresult.Write(summaryFile, summary); werr != nil {
		log.Warn("could not write the summary", "file", summaryFile, "error", werr)
	}
	log.Info("summary", "counts", summary.Counts, "bytesFreed", summary.BytesFreed, "dryRun", summary.DryRun)
	return ExitCode(err)
}
