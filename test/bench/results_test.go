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

// writeResults records a benchmark's figures in bench/results/<name>.json.
func writeResults(t *testing.T, name, key string, v any) {
	t.Helper()
	out := filepath.Join("..", "..", "bench", "results")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(map[string]any{"date": time.Now().UTC().Format(time.RFC3339), key: v}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, name+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nwritten to bench/results/%s.json\n", name)
}
