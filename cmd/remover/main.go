// Command remover removes images from its node through CRI: an ImageList's
// entries (--imagelist), or what the collector or scanner hands over.
package main

import (
	"github.com/eraser-oss/eraser/internal/remover"
	"github.com/eraser-oss/eraser/internal/worker"
)

func main() { worker.Main(&remover.Command{}) }
