// Package logging provides the --log-level flag every Eraser binary shares
// and the structured (JSON) logger of the node workers. It depends on the
// standard library only, to keep the workers small.
package logging

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// Levels are the values --log-level accepts.
var Levels = []string{"debug", "info", "warn", "error"}

// Level is the value of --log-level.
type Level string

// Bind registers --log-level on fs.
func (l *Level) Bind(fs *flag.FlagSet) {
	if *l == "" {
		*l = "info"
	}
	fs.Var(l, "log-level", fmt.Sprintf("log level: one of %v", Levels))
}

func (l *Level) String() string { return string(*l) }

// Set validates the level.
func (l *Level) Set(s string) error {
	if s == "warning" {
		s = "warn"
	}
	if !slices.Contains(Levels, s) {
		return fmt.Errorf("must be one of %v", Levels)
	}
	*l = Level(s)
	return nil
}

// Slog is the level for log/slog.
func (l Level) Slog() slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// NewWorker returns the JSON logger of a node worker, with the component's
// name on every line; result lines (nodereport.Message) are written at any level.
func NewWorker(w io.Writer, level Level, component string) *slog.Logger {
	inner := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(reportHandler{Handler: inner, level: level.Slog()}).With("component", component)
}

// reportHandler lets result lines through below the configured level.
type reportHandler struct {
	slog.Handler
	level slog.Level
}

// Enabled is true at every level: Handle decides, since only it sees the
// message.
func (h reportHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h reportHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.level && r.Message != nodereport.Message {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h reportHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return reportHandler{Handler: h.Handler.WithAttrs(attrs), level: h.level}
}

func (h reportHandler) WithGroup(name string) slog.Handler {
	return reportHandler{Handler: h.Handler.WithGroup(name), level: h.level}
}
