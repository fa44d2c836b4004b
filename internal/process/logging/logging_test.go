package logging

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// TestResultLinesAtAnyLevel: a worker's per-image result lines are its
// node's report, so --log-level never drops them; other lines obey it.
func TestResultLinesAtAnyLevel(t *testing.T) {
	for _, level := range Levels {
		var buf bytes.Buffer
		log := NewWorker(&buf, Level(level), "remover").With("k", "v")
		log.Debug(nodereport.Message, "outcome", "in use")
		log.Info("progress")
		log.Error("trouble")
		out := buf.String()
		if !strings.Contains(out, `"msg":"image","component":"remover","k":"v","outcome":"in use"`) {
			t.Errorf("level %s: result line missing:\n%s", level, out)
		}
		if got, want := strings.Contains(out, "progress"), level == "debug" || level == "info"; got != want {
			t.Errorf("level %s: info line written: %v", level, got)
		}
		if !strings.Contains(out, "trouble") {
			t.Errorf("level %s: error line missing", level)
		}
	}
}
