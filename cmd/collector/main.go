// Command collector lists its node's unused, unprotected images and hands
// them to the scanner or the remover; see internal/collector.
package main

import (
	"github.com/eraser-oss/eraser/internal/collector"
	"github.com/eraser-oss/eraser/internal/worker"
)

func main() { worker.Main(&collector.Command{}) }
