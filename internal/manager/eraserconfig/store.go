package eraserconfig

import (
	"sync"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Store is safe for concurrent use.
type Store struct {
	mu      sync.RWMutex
	cfg     *config.Config
	raw     []byte
	version int
	subs    []chan struct{}
}

// NewStore holds the initial configuration and its document.
func NewStore(cfg *config.Config, raw []byte) *Store {
	return &Store{cfg: cfg, raw: raw, version: 1}
}

// Get returns the configuration, its document and a version that changes on
// every Set. Callers must not modify what they get.
func (s *Store) Get() (*config.Config, []byte, int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cfg, s.raw, s.version
}

// Set replaces the configuration and wakes the subscribers.
func (s *Store) Set(cfg *config.Config, raw []byte) {
	s.mu.Lock()
	s.cfg, s.raw = cfg, raw
	s.version++
	subs := s.subs
	s.mu.Unlock()
	for _, c := range subs {
		select {
		case c <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Subscribe returns a channel that receives after every Set.
func (s *Store) Subscribe() <-chan struct{} {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs = append(s.subs, c)
	s.mu.Unlock()
	return c
}
