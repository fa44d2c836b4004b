// Package logging sets up the structured logger every Eraser binary uses,
// from the --log-level flag that upstream Eraser's binaries share.
package logging

import (
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
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

// New returns a JSON logger at the level, writing to w, and makes it the
// logger of controller-runtime and klog too so that every line is structured.
func New(level Level, w io.Writer) logr.Logger {
	var zl zapcore.Level
	switch level {
	case "debug":
		zl = zapcore.DebugLevel
	case "warn":
		zl = zapcore.WarnLevel
	case "error":
		zl = zapcore.ErrorLevel
	default:
		zl = zapcore.InfoLevel
	}
	log := zap.New(zap.Level(zl), zap.WriteTo(w), zap.UseDevMode(false), zap.JSONEncoder(func(c *zapcore.EncoderConfig) {
		c.TimeKey = "ts"
		c.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	}))
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log
}
