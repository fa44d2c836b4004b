// Command configschema writes the EraserConfig's JSON Schema, generated from
// the configuration's Go types (config.Schema), as the schema of
// runtimeConfig in the chart's values.schema.json. Run by make manifests.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: configschema charts/eraser/values.schema.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "configschema:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	props, ok := schema["properties"].(map[string]any)
	if !ok {
		return fmt.Errorf("%s: no properties", path)
	}
	rc := config.Schema()
	rc["description"] = "The EraserConfig document (docs/configuration.md), written as it is into ConfigMap eraser-manager-config. Generated from the configuration's types by make manifests: every version's keys; an unknown key or a wrong type is refused here, the rest by the manager (kubectl eraser config check)."
	props["runtimeConfig"] = rc
	out, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}
