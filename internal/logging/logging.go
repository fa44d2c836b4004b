// Package logging provides the --log-level flag every Eraser binary shares
// and the structured (JSON) logger of the node workers. It depends on the
// standard library only, to keep the workers small.
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
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
// name on every line.
func NewWorker(w io.Writer, level Level, component string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level.Slog()})).With("component", component)
}
