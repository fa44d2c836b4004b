package nodecmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
)

// ran is what a run of Main gave: its exit code, its output, and the first
// line of its errors (the rest, when there is any, is the usage).
type ran struct {
	Code      int
	Stdout    string
	FirstLine string
}

// TestMainRefusesBeforeTheRuntime: help, usage errors and files that cannot
// be read end the command with their exit code before it dials the
// runtime; an endpoint that is not there ends it as "could not run".
func TestMainRefusesBeforeTheRuntime(t *testing.T) {
	t.Setenv(cri.EnvRuntimeEndpoint, "unix:///nonexistent/eraser-test/env.sock")
	keep := filepath.Join(t.TempDir(), "keep.json")
	if err := os.WriteFile(keep, []byte(`{"excluded": ["docker.io/library/*"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		want ran
	}{
		"help":                 {args: []string{"help"}, want: ran{Code: ExitOK, Stdout: usage}},
		"-h":                   {args: []string{"-h"}, want: ran{Code: ExitOK, Stdout: usage}},
		"--help":               {args: []string{"--help"}, want: ran{Code: ExitOK, Stdout: usage}},
		"a subcommand's help":  {args: []string{"prune", "-h"}, want: ran{Code: ExitOK, FirstLine: "Usage of eraser node prune:"}},
		"no subcommand":        {want: ran{Code: ExitUsage, FirstLine: strings.SplitN(usage, "\n", 2)[0]}},
		"unknown subcommand":   {args: []string{"remove"}, want: ran{Code: ExitUsage, FirstLine: strings.SplitN(usage, "\n", 2)[0]}},
		"unknown output":       {args: []string{"list", "-o", "yaml"}, want: ran{Code: ExitUsage, FirstLine: `error: -o "yaml": want table or json`}},
		"prune's flag on list": {args: []string{"list", "--images=*"}, want: ran{Code: ExitUsage, FirstLine: "flag provided but not defined: -images"}},
		"list's flag on prune": {args: []string{"prune", "--leftovers"}, want: ran{Code: ExitUsage, FirstLine: "flag provided but not defined: -leftovers"}},
		"prune of nothing": {args: []string{"prune"}, want: ran{Code: ExitUsage,
			FirstLine: `error: prune needs --images (a list of images, or "*" for every unused, unprotected image), --unused-for, or the thresholds`}},
		"one threshold": {args: []string{"prune", "--high-threshold-percent=80"}, want: ran{Code: ExitUsage,
			FirstLine: "error: --high-threshold-percent and --low-threshold-percent: set both or neither"}},
		"low not below high": {args: []string{"prune", "--high-threshold-percent=80", "--low-threshold-percent=80"}, want: ran{Code: ExitUsage,
			FirstLine: "error: --low-threshold-percent (80) must be below --high-threshold-percent (80)"}},
		"negative age": {args: []string{"prune", "--images=*", "--min-age=-1h"}, want: ran{Code: ExitUsage,
			FirstLine: "error: --min-age: must not be negative, got -1h0m0s"}},
		"clock not RFC 3339": {args: []string{"prune", "--images=*", "--now=yesterday"}, want: ran{Code: ExitUsage,
			FirstLine: `error: --now: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`}},
		"exclusion file missing": {args: []string{"list", "--exclude-file=/nonexistent/eraser-test/keep.json"}, want: ran{Code: ExitCouldNotRun,
			FirstLine: "error: reading exclusion list: open /nonexistent/eraser-test/keep.json: no such file or directory"}},
		"every exclusion file read": {args: []string{"list", "--exclude-file=" + keep, "--exclude-file=/nonexistent/eraser-test/more.json"}, want: ran{Code: ExitCouldNotRun,
			FirstLine: "error: reading exclusion list: open /nonexistent/eraser-test/more.json: no such file or directory"}},
		"endpoint from the environment": {args: []string{"list"}, want: ran{Code: ExitCouldNotRun,
			FirstLine: "error: runtime socket /nonexistent/eraser-test/env.sock: stat /nonexistent/eraser-test/env.sock: no such file or directory (is the runtime running, and its socket mounted into the pod?)"}},
		"endpoint flag over the environment": {args: []string{"prune", "--images=*", "--runtime-endpoint=unix:///nonexistent/eraser-test/flag.sock"}, want: ran{Code: ExitCouldNotRun,
			FirstLine: "error: runtime socket /nonexistent/eraser-test/flag.sock: stat /nonexistent/eraser-test/flag.sock: no such file or directory (is the runtime running, and its socket mounted into the pod?)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tc.args, &stdout, &stderr)
			got := ran{Code: code, Stdout: stdout.String(), FirstLine: strings.SplitN(stderr.String(), "\n", 2)[0]}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("eraser node %s (-want +got):\n%s", strings.Join(tc.args, " "), diff)
			}
		})
	}
}

func TestShortID(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := map[string]struct{ in, want string }{
		"image ID":             {in: "sha256:" + hex, want: "sha256:0123456789ab"},
		"digest cut short":     {in: "sha256:0123", want: "sha256:0123"},
		"other algorithm":      {in: "sha512:" + hex, want: "sha512:" + hex},
		"reference, not an ID": {in: "docker.io/library/alpine:3.7.3", want: "docker.io/library/alpine:3.7.3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, shortID(tc.in)); diff != "" {
				t.Errorf("shortID(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestNames: list's table shows an image's tags, and sorts by the first,
// images with none last.
func TestNames(t *testing.T) {
	cases := map[string]struct {
		img             cri.Image
		names, sortedBy string
	}{
		"tagged":      {img: cri.Image{ID: "sha256:a", Tags: []string{"example.com/app:1", "example.com/app:latest"}}, names: "example.com/app:1,example.com/app:latest", sortedBy: "example.com/app:1"},
		"by ID alone": {img: cri.Image{ID: "sha256:a"}, names: "<none>", sortedBy: "~sha256:a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := [2]string{names(tc.img), firstName(tc.img)}
			if diff := cmp.Diff([2]string{tc.names, tc.sortedBy}, got); diff != "" {
				t.Errorf("names, firstName (-want +got):\n%s", diff)
			}
		})
	}
}
