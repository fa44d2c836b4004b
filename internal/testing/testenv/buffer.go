package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a process's output, or a logger's, read by the test while it
// is still being written from other goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Tail is the last n lines written.
func (b *Buffer) Tail(n int) string {
	lines := strings.Split(b.String(), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
