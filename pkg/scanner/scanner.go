// Package scanner is for authors of custom vulnerability scanners. A scanner
// runs as the "trivy-scanner" container of a scheduled worker pod, between
// the collector and the remover: it receives the node's unused images,
// decides which must go, and sends those to the remover.
//
// The protocol is upstream Eraser's (endpoints in /run/eraser.sh/shared-data,
// a JSON list of {"image_id","names","digests"}, the "complete" token), so
// scanners written for upstream keep working, and scanners written with this
// package also run under upstream's collector and remover.
//
//	p, err := scanner.NewImageProvider(scanner.WithContext(ctx))
//	if err != nil { ... }
//	defer p.Close()
//	images, err := p.ReceiveImages()
//	... scan ...
//	err = p.SendImages(vulnerable, failed)
//	err = p.Finish()
package scanner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// Image is one image of the node, as the collector reports it.
type Image = handoff.Image

// ImageProvider is a scanner's side of the hand-off.
type ImageProvider interface {
	// ReceiveImages returns the images the collector found unused and
	// unprotected. It blocks until the collector sends them.
	ReceiveImages() ([]Image, error)
	// SendImages hands the images to remove to the remover: every
	// non-compliant one, and the failed ones when WithDeleteScanFailedImages
	// is on (off by default: what could not be judged is kept).
	SendImages(nonCompliant, failed []Image) error
	// Finish waits until the remover says it has finished. A message other
	// than the completion token is an error (upstream returned nil).
	Finish() error
	// Close releases the completion endpoint; safe to call more than once.
	Close() error
	// DeleteEOLImages reports the end-of-life policy the scanner was given.
	DeleteEOLImages() bool
}

// Option configures a provider.
type Option func(*provider)

// WithContext bounds every wait.
func WithContext(ctx context.Context) Option { return func(p *provider) { p.ctx = ctx } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(p *provider) { p.log = l } }

// WithDeleteScanFailedImages also removes images whose scan failed.
func WithDeleteScanFailedImages(on bool) Option { return func(p *provider) { p.deleteFailed = on } }

// WithDeleteEOLImages records whether end-of-life images count as non-compliant.
func WithDeleteEOLImages(on bool) Option { return func(p *provider) { p.deleteEOL = on } }

// WithSharedDir changes the shared directory (tests; the pod mounts the default).
func WithSharedDir(dir string) Option { return func(p *provider) { p.dir = dir } }

type provider struct {
	ctx          context.Context
	log          *slog.Logger
	dir          string
	transport    handoff.Transport
	done         handoff.Completion
	deleteFailed bool
	deleteEOL    bool
}

// NewImageProvider publishes the scanner's completion endpoint at once, so
// that it exists before the remover can finish and signal it. (The remover
// learns that a scanner runs from the manager's --scanner, not from it.)
func NewImageProvider(opts ...Option) (ImageProvider, error) {
	p := &provider{ctx: context.Background(), log: slog.Default(), dir: podpaths.SharedData(podpaths.OS(runtime.GOOS)), transport: handoff.Default()}
	for _, o := range opts {
		o(p)
	}
	done, err := p.transport.PublishCompletion(handoff.Path(p.dir, handoff.EraseCompleteScan))
	if err != nil {
		return nil, fmt.Errorf("publishing the scanner's completion endpoint: %w", err)
	}
	p.done = done
	return p, nil
}

func (p *provider) ReceiveImages() ([]Image, error) {
	images, err := p.transport.ReceiveImages(p.ctx, handoff.Path(p.dir, handoff.CollectScan))
	if err != nil {
		return nil, fmt.Errorf("receiving images from the collector: %w", err)
	}
	p.log.Info("received images", "count", len(images))
	return images, nil
}

func (p *provider) SendImages(nonCompliant, failed []Image) error {
	out := append([]Image{}, nonCompliant...)
	if p.deleteFailed {
		out = append(out, failed...)
	}
	p.log.Info("sending images to the remover", "nonCompliant", len(nonCompliant), "failed", len(failed), "deleteFailed", p.deleteFailed)
	if err := p.transport.SendImages(p.ctx, handoff.Path(p.dir, handoff.ScanErase), out); err != nil {
		return fmt.Errorf("sending images to the remover: %w", err)
	}
	return nil
}

func (p *provider) Finish() error {
	if p.done == nil {
		return errors.New("the provider is closed")
	}
	err := p.done.Wait(p.ctx)
	cerr := p.Close()
	if err != nil {
		return fmt.Errorf("waiting for the remover: %w", err)
	}
	return cerr
}

func (p *provider) Close() error {
	if p.done == nil {
		return nil
	}
	return p.done.Close()
}

func (p *provider) DeleteEOLImages() bool { return p.deleteEOL }
