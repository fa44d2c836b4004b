// Command pause sleeps until it is signalled. Tests put it in the images they
// build: as the runtime's sandbox image, and as the process of containers
// that must keep running while an image removal is attempted.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
