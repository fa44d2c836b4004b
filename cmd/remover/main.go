// Command remover removes images from its node through CRI: an ImageList's
// entries (--imagelist), or what the collector or scanner hands over.
package main

import (
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/worker"
)

func main() { worker.Main(&remover.Command{}) }
