//go:build windows

// Command piperelay is test support for the Windows tier: a Windows
// program, run under Wine, that listens on a named pipe and relays each
// connection to a TCP address, where the test relays it on to a real
// containerd's unix socket. The Windows eraser command then reaches a real
// containerd through a named pipe, as on a Windows node.
//
//	piperelay -pipe NAME -to 127.0.0.1:PORT
//
// It prints "ready" once clients can connect, and ends when its standard
// input closes.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/Microsoft/go-winio"
)

func main() {
	pipe := flag.String("pipe", "", `the pipe's name, without \\.\pipe\`)
	to := flag.String("to", "", "the TCP address each connection is relayed to")
	flag.Parse()
	if *pipe == "" || *to == "" {
		fmt.Fprintln(os.Stderr, "usage: piperelay -pipe NAME -to HOST:PORT")
		os.Exit(2)
	}
	path := `\\.\pipe\` + *pipe
	l, err := winio.ListenPipe(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "piperelay:", err)
		os.Exit(1)
	}
	// Wine 8 hands the first client to go-winio's first pipe instance,
	// which is never accepted; a connection parked there keeps the real
	// clients off it (internal/node/cri's named-pipe tests do the same).
	// On Windows it is accepted and relayed like any other.
	park, err := winio.DialPipe(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "piperelay: parking the first connection:", err)
		os.Exit(1)
	}
	defer park.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go relay(c, *to)
		}
	}()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = l.Close()
}

// relay copies c to a new connection to addr and back, until either side
// ends.
func relay(c net.Conn, addr string) {
	defer c.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "piperelay:", err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
