//go:build linux

// The pause image the nodes run and the network plumbing of the local cluster.

package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// buildPause builds the sandbox image every node's containerd runs pods in;
// there is no registry to pull it from.
func (c *cluster) buildPause() (string, error) {
	bin := filepath.Join(c.o.state, "pause")
	src := c.o.pauseSource
	if !filepath.IsAbs(src) {
		src = "./" + filepath.Clean(src)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the pause binary from %s: %w: %s", c.o.pauseSource, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	archive := filepath.Join(c.o.state, "pause.tar")
	err = testimage.WriteArchive(archive, []testimage.Image{{
		Tags: []string{sandboxImage}, Files: map[string][]byte{"pause": data}, Entrypoint: []string{"/pause"},
	}})
	return archive, err
}

// serveKubernetesService makes the kubernetes Service's address work without
// kube-proxy: the address goes on a bridge of its own (pods reach the host
// through their default gateway) and a forwarder passes connections to the
// API server, whose certificate names that address.
func (c *cluster) serveKubernetesService(apiPort int) error {
	for _, args := range [][]string{
		{"link", "add", serviceBridge, "type", "bridge"},
		{"addr", "add", serviceHost + "/32", "dev", serviceBridge},
		{"link", "set", serviceBridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(serviceHost, "443"))
	if err != nil {
		return fmt.Errorf("serving the kubernetes Service: %w", err)
	}
	target := fmt.Sprintf("127.0.0.1:%d", apiPort)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(conn, target)
		}
	}()
	return nil
}

func forward(conn net.Conn, target string) {
	defer conn.Close()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, conn)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(conn, up)
	_ = conn.(*net.TCPConn).CloseWrite()
	wg.Wait()
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
