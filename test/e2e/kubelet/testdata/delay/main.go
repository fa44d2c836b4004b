// Command delay waits, then becomes another program:
//
//	delay DURATION PROGRAM [ARG...]
//
// The kubelet tier puts it in front of the remover's entrypoint (see
// oneworker_test.go) so that a worker pod is unfinished for at least
// DURATION, whatever the removal itself takes. It is a test fixture, built
// by the test, never shipped.
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: delay DURATION PROGRAM [ARG...]")
		os.Exit(2)
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "delay:", err)
		os.Exit(2)
	}
	time.Sleep(d)
	// The program takes this process's place (its PID, its termination
	// message file), so the container's outcome is the program's own.
	err = syscall.Exec(os.Args[2], os.Args[2:], os.Environ())
	fmt.Fprintln(os.Stderr, "delay: exec", os.Args[2]+":", err)
	os.Exit(1)
}
