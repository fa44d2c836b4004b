// Command collector lists its node's unused, unprotected images and hands
// them to the scanner or the remover; see internal/node/collector.
package main

import (
	"github.com/eraser-oss/eraser/internal/node/collector"
	"github.com/eraser-oss/eraser/internal/node/worker"
)

func main() { worker.Main(&collector.Command{}) }
