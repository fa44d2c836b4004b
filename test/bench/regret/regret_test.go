package regret

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRegretBench replays every profile under every policy and prints and
// writes the figures (bench/results/regret.json). BENCH_REGRET_SCALE sets
// how much faster than the trace the kubelet's clock runs (default 60000:
// one 5-minute GC period per 5 ms).
func TestRegretBench(t *testing.T) {
	if os.Getenv("BENCH_REGRET") == "" {
		t.Skip("set BENCH_REGRET=1 (make bench-regret)")
	}
	scale := 60000.0
	if s := os.Getenv("BENCH_REGRET_SCALE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			t.Fatalf("BENCH_REGRET_SCALE=%q: a positive number", s)
		}
		scale = v
	}
	profiles, policies := Profiles(), Policies()
	if f := os.Getenv("BENCH_REGRET_PROFILES"); f != "" {
		profiles = slices.DeleteFunc(profiles, func(p *Trace) bool { return !slices.Contains(strings.Fields(f), p.Name) })
	}
	if f := os.Getenv("BENCH_REGRET_POLICIES"); f != "" {
		policies = slices.DeleteFunc(policies, func(p Policy) bool { return !slices.Contains(strings.Fields(f), p.Name) })
	}
	start := time.Now()
	results, err := Run(context.Background(), profiles, policies, scale, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nregret bench: %d profiles x %d policies, 30 days each, kubelet clock x%.0f, %s on %d CPUs\n\n", len(profiles), len(policies), scale, time.Since(start).Round(time.Second), runtime.NumCPU())
	verdicts := Print(os.Stdout, results)
	doc := map[string]any{
		"date":     time.Now().UTC().Format(time.RFC3339),
		"scale":    scale,
		"policies": policies,
		"results":  results,
		"verdicts": verdicts,
	}
	var params []map[string]any
	for _, p := range profiles {
		params = append(params, map[string]any{"profile": p.Name, "description": p.Description, "seed": p.Seed, "params": p.Params, "images": len(p.Images), "events": len(p.Events)})
	}
	doc["profiles"] = params
	out := filepath.Join("..", "..", "..", "bench", "results")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "regret.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Println("\nwritten to bench/results/regret.json")
}
