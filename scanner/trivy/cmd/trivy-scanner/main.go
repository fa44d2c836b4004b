// Command trivy-scanner is the scheduled worker pod's scanner: it judges
// the collector's images with Trivy and hands the non-compliant ones to
// the remover; see internal/app.
package main

import (
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/app"
)

func main() { worker.Main(&app.Command{}) }
