// Command scanner is a complete custom scanner, written with
// github.com/eraser-oss/eraser/pkg/scanner. It "scans" by name: images whose
// name contains one of the words given with -flag (default "vulnerable")
// are non-compliant and are removed; the others are kept. A real scanner
// replaces scan() with its own judgement.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eraser-oss/eraser/pkg/scanner"
)

func main() {
	words := flag.String("flag", "vulnerable", "comma-separated words that make an image non-compliant")
	shared := flag.String("shared-dir", "", "hand-off directory (default: the pod's)")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "example-scanner")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	opts := []scanner.Option{scanner.WithContext(ctx), scanner.WithLogger(log)}
	if *shared != "" {
		opts = append(opts, scanner.WithSharedDir(*shared))
	}
	p, err := scanner.NewImageProvider(opts...)
	if err != nil {
		log.Error("start", "error", err)
		os.Exit(1)
	}
	defer p.Close()

	images, err := p.ReceiveImages()
	if err != nil {
		log.Error("receive", "error", err)
		os.Exit(1)
	}
	var nonCompliant []scanner.Image
	for _, img := range images {
		if scan(img, strings.Split(*words, ",")) {
			nonCompliant = append(nonCompliant, img)
		}
	}
	if err := p.SendImages(nonCompliant, nil); err != nil {
		log.Error("send", "error", err)
		os.Exit(1)
	}
	if err := p.Finish(); err != nil {
		log.Error("finish", "error", err)
		os.Exit(1)
	}
	log.Info("done", "scanned", len(images), "nonCompliant", len(nonCompliant))
}

// scan is this example's whole judgement.
func scan(img scanner.Image, words []string) bool {
	for _, n := range img.Names {
		for _, w := range words {
			if w != "" && strings.Contains(n, w) {
				return true
			}
		}
	}
	return false
}
