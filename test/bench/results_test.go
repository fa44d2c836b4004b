//go:build linux && bench

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeResults records a benchmark's figures under key in
// bench/results/<name>.json. The file's other keys are kept, so that two
// tests can share a file (TestManagerBench's "sizes", TestManagerBenchQueue's
// "queue"); "date" is this write's, and "dates" says when each key was
// written.
func writeResults(t *testing.T, name, key string, v any) {
	t.Helper()
	out := filepath.Join("..", "..", "bench", "results")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(out, name+".json")
	doc := map[string]any{}
	if data, err := os.ReadFile(file); err == nil {
		// A file that does not decode is replaced.
		_ = json.Unmarshal(data, &doc)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	dates, _ := doc["dates"].(map[string]any)
	if dates == nil {
		dates = map[string]any{}
	}
	dates[key] = now
	doc["date"], doc["dates"], doc[key] = now, dates, v
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nwritten to bench/results/%s.json (%s)\n", name, key)
}
