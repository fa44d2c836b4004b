package testenv

import (
	"sync"
	"testing"
)

// Binary is a main package built on the first test that runs it, so that a
// run of the package's other tests builds nothing.
type Binary struct {
	pkg     string
	once    sync.Once
	path    string
	cleanup func()
	err     error
}

// NewBinary is the main package pkg (an import path), not built yet.
func NewBinary(pkg string) *Binary { return &Binary{pkg: pkg} }

// Path builds the binary on the first call and returns its path; a failed
// build fails every test asking for it.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() { b.path, b.cleanup, b.err = BuildBinary(b.pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the binary if it was built; call it at the end of TestMain.
func (b *Binary) Remove() {
	if b.cleanup != nil {
		b.cleanup()
	}
}
