package manager

import (
	"io"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/eraser-oss/eraser/internal/process/logging"
)

// NewLogger returns the manager's JSON logger at the level and makes it the
// logger of controller-runtime and klog too, so that every line is structured.
func NewLogger(level logging.Level, w io.Writer) logr.Logger {
	// slog levels are zap levels times four (debug -4/-1 ... error 8/2).
	log := zap.New(zap.Level(zapcore.Level(level.Slog()/4)), zap.WriteTo(w), zap.UseDevMode(false), zap.JSONEncoder(func(c *zapcore.EncoderConfig) {
		c.TimeKey = "ts"
		c.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	}))
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log
}
