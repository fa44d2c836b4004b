package nodereport

import (
	"context"
	"log/slog"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Message is the message of a result line, the one line a worker logs per
// image (or leftover) it judged. Those lines are the node's report: the
// manager reads them from the container's log (ParseLog) before the pod is
// deleted, so the workers' loggers write them whatever --log-level says.
const Message = "image"

// Line is a result line: what the workers log and ParseLog reads back.
type Line struct {
	Outcome string `json:"outcome"`
	// Target is what the run was asked about: an image name, an image ID
	// ("*" targets), a leftover's name.
	Target string `json:"target"`
	// Image is the image's ID, with Names its names; empty when the target
	// named no image on the node.
	Image string   `json:"image"`
	Names []string `json:"names"`
	// Policy is the retention policy that chose a removal.
	Policy string `json:"policy"`
	// Bytes is what the removal freed, when BytesKnown.
	Bytes      uint64 `json:"bytes"`
	BytesKnown bool   `json:"-"`
	Detail     string `json:"detail"`
	// Leftover and Namespace are a leftover's kind and containerd
	// namespace.
	Leftover  string `json:"leftover"`
	Namespace string `json:"namespace"`
	DryRun    bool   `json:"dryRun"`
	// Scan is on a scanner's result lines.
	Scan *workerresult.Scan `json:"scan"`
}

// LogAttrs are the line's attributes, the empty ones left out.
func (l Line) LogAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.String("outcome", l.Outcome), slog.String("target", l.Target)}
	if l.Leftover != "" {
		attrs = append(attrs, slog.String("leftover", l.Leftover))
	}
	if l.Image != "" {
		attrs = append(attrs, slog.String("image", l.Image), slog.Any("names", l.Names))
	}
	if l.Policy != "" {
		attrs = append(attrs, slog.String("policy", l.Policy))
	}
	if l.BytesKnown {
		attrs = append(attrs, slog.Uint64("bytes", l.Bytes))
	}
	if l.Detail != "" {
		attrs = append(attrs, slog.String("detail", l.Detail))
	}
	if l.Namespace != "" {
		attrs = append(attrs, slog.String("namespace", l.Namespace))
	}
	if l.DryRun {
		attrs = append(attrs, slog.Bool("dryRun", true))
	}
	if l.Scan != nil {
		attrs = append(attrs, slog.Any("scan", l.Scan))
	}
	return attrs
}

// Log writes the line at level.
func (l Line) Log(ctx context.Context, log *slog.Logger, level slog.Level) {
	log.LogAttrs(ctx, level, Message, l.LogAttrs()...)
}
