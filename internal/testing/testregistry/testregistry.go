// Package testregistry serves go-containerregistry's in-memory OCI registry,
// a real implementation of the distribution API, on loopback for the tests
// (and the local cluster's tools) that push and pull images, and pushes
// images into it.
package testregistry

import (
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Handler is a new, empty registry, logging nothing; a test wraps it to
// count or refuse requests, or serves it over TLS.
func Handler() http.Handler {
	return registry.New(registry.Logger(log.New(io.Discard, "", 0)))
}

// Start serves a new registry on loopback until the test ends and returns
// its address (host:port).
func Start(t testing.TB) string {
	t.Helper()
	return Serve(t, Handler())
}

// Serve serves h, a wrapped Handler, on loopback until the test ends and
// returns its address.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ServeOn(ln, h))
	return ln.Addr().String()
}

// Listen serves a new registry on loopback until stop is called, for a
// TestMain or a tool, which outlive a test.
func Listen() (host string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return ln.Addr().String(), ServeOn(ln, Handler()), nil
}

// ServeOn serves h on ln, an address the registry's users reach, until
// stop is called.
func ServeOn(ln net.Listener, h http.Handler) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }
}

// Push uploads img as ref (REPO:TAG) into the registry at host (host:port),
// in plain HTTP. REPO may begin with another registry's host, as in a
// mirror's layout (registry.k8s.io/pause:3.10).
func Push(host, ref string, img v1.Image) error {
	r, err := name.ParseReference(host+"/"+ref, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(r, img)
}

// Delete removes the manifest ref (REPO:TAG) names from the registry at
// host, by its digest and by its tag, as a registry that prunes an image
// does: neither the tag nor the digest is served after it.
func Delete(host, ref string) error {
	r, err := name.ParseReference(host+"/"+ref, name.Insecure)
	if err != nil {
		return err
	}
	desc, err := remote.Head(r)
	if err != nil {
		return err
	}
	if err := remote.Delete(r.Context().Digest(desc.Digest.String())); err != nil {
		return err
	}
	return remote.Delete(r)
}
