// Package configcheck is `eraser config check` and `kubectl eraser config
// check`: the manager's own validation of a configuration, warnings
// included, before it lands in a cluster. It reads an EraserConfig
// document, a ConfigMap manifest holding one (as deploy/eraser.yaml ships
// it), or a Helm values file (its runtimeConfig, versioned as the chart
// does).
package configcheck

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Exit codes, as the other commands'.
const (
	ExitOK      = 0
	ExitInvalid = 1
	ExitUsage   = 2
)

// Result is one file's check.
type Result struct {
	// Source says what the file was read as.
	Source   string
	Warnings []string
	Err      error
}

// Check validates a file's configuration as the manager would load it.
func Check(data []byte) Result {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return Result{Source: "a YAML file", Err: fmt.Errorf("not YAML: %w", err)}
	}
	doc, source, err := document(data, top)
	if err != nil {
		return Result{Source: source, Err: err}
	}
	_, warnings, err := config.Parse(doc)
	return Result{Source: source, Warnings: warnings, Err: err}
}

// document finds the EraserConfig document in the file.
func document(data []byte, top map[string]any) ([]byte, string, error) {
	switch {
	case top["kind"] == "ConfigMap":
		cm, _ := top["data"].(map[string]any)
		doc, ok := cm[config.ConfigKey].(string)
		if !ok {
			return nil, "a ConfigMap", fmt.Errorf("the ConfigMap has no data.%s", config.ConfigKey)
		}
		return []byte(doc), "the ConfigMap's " + config.ConfigKey, nil
	case top["runtimeConfig"] != nil:
		rc, ok := top["runtimeConfig"].(map[string]any)
		if !ok {
			return nil, "Helm values", errors.New("runtimeConfig: want a map, the EraserConfig document")
		}
		withVersion(rc)
		doc, err := yaml.Marshal(rc)
		if err != nil {
			return nil, "Helm values", err
		}
		return doc, "Helm values' runtimeConfig", nil
	}
	return data, "an EraserConfig document", nil
}

// withVersion fills in apiVersion and kind where the values leave them
// out, by the document's shape, as the chart's eraser.config does:
// components.eraser is v1alpha1, a string manager.runtime v1alpha2.
func withVersion(rc map[string]any) {
	if rc["apiVersion"] == nil {
		version := config.VersionV1alpha3
		components, _ := rc["components"].(map[string]any)
		manager, _ := rc["manager"].(map[string]any)
		if _, ok := components["eraser"]; ok {
			version = config.VersionV1alpha1
		} else if _, ok := manager["runtime"].(string); ok {
			version = config.VersionV1alpha2
		}
		rc["apiVersion"] = version
	}
	if rc["kind"] == nil {
		rc["kind"] = "EraserConfig"
	}
}

// Usage is the command's help.
const Usage = `usage: config check -f FILE [-f FILE ...]   (FILE "-": standard input)

Validates each file as the manager loads its configuration, warnings
included: an EraserConfig document, a ConfigMap manifest holding one under
controller_manager_config.yaml, or a Helm values file (its runtimeConfig).
Exit status 0 when every file is valid (warnings allowed), 1 when one is
not, 2 on a usage error.
`

// Main runs `config <args>` (args[0] is "check") and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, Usage)
		return ExitUsage
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage) }
	var files []string
	fs.Func("f", "a file to check (repeatable; - for standard input)", func(s string) error { files = append(files, s); return nil })
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if len(files) == 0 || fs.NArg() > 0 {
		fs.Usage()
		return ExitUsage
	}
	code := ExitOK
	for _, f := range files {
		var data []byte
		var err error
		if f == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
			code = ExitInvalid
			continue
		}
		r := Check(data)
		for _, w := range r.Warnings {
			fmt.Fprintf(stdout, "%s: warning: %s\n", f, w)
		}
		if r.Err != nil {
			fmt.Fprintf(stdout, "%s: invalid (%s): %v\n", f, r.Source, r.Err)
			code = ExitInvalid
			continue
		}
		fmt.Fprintf(stdout, "%s: valid (%s), %d warnings\n", f, r.Source, len(r.Warnings))
	}
	return code
}
