package vulndb

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

// stallingRegistry accepts connections on loopback and never answers: a
// registry behind a proxy or firewall that swallows traffic looks so.
func stallingRegistry(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

type prepared struct {
	dir        string
	downloaded bool
	err        error
}

// prepare runs Prepare, failing the test if it has not returned long after
// any deadline in play: without one of its own it would wait for ever.
func prepare(t *testing.T, ctx context.Context, o Options) prepared {
	t.Helper()
	done := make(chan prepared, 1)
	go func() {
		dir, downloaded, err := Prepare(ctx, o)
		done <- prepared{dir, downloaded, err}
	}()
	select {
	case p := <-done:
		return p
	case <-time.After(time.Minute):
		t.Fatal("Prepare still waiting on a registry that never answers, a minute on")
		return prepared{}
	}
}

func TestDownloadTimeout(t *testing.T) {
	o := Options{CacheDir: t.TempDir(), Repo: stallingRegistry(t) + "/trivy-db", DownloadTimeout: 300 * time.Millisecond}
	start := time.Now()
	p := prepare(t, context.Background(), o)
	t.Logf("after %v: %v", time.Since(start), p.err)
	if p.err == nil || p.dir != "" || p.downloaded {
		t.Fatalf("Prepare = %q, %v, %v; want an error and no DB", p.dir, p.downloaded, p.err)
	}
	for _, want := range []string{"dbDownloadTimeout", "300ms", o.Repo} {
		if !strings.Contains(p.err.Error(), want) {
			t.Errorf("error %q does not mention %q", p.err, want)
		}
	}
	if !errors.Is(p.err, ErrDownloadTimeout) {
		t.Errorf("error %v is not ErrDownloadTimeout", p.err)
	}
	if _, err := os.Stat(o.Dir() + "/metadata.json"); err == nil {
		t.Error("a DB that was never downloaded has metadata")
	}
}

// The run's own end (the pod's deadline, a signal) is not the download
// timeout, and is not reported as one.
func TestDownloadCancelledByCaller(t *testing.T) {
	o := Options{CacheDir: t.TempDir(), Repo: stallingRegistry(t) + "/trivy-db", DownloadTimeout: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	p := prepare(t, ctx, o)
	if p.err == nil || errors.Is(p.err, ErrDownloadTimeout) || strings.Contains(p.err.Error(), "dbDownloadTimeout") {
		t.Fatalf("err = %v; want the caller's cancellation, not the download timeout", p.err)
	}
}

func TestDownloadTimeoutDefault(t *testing.T) {
	cases := map[string]struct {
		set  time.Duration
		want time.Duration
	}{
		"unset":    {set: 0, want: scanconfig.DefaultDBDownloadTimeout},
		"negative": {set: -time.Second, want: scanconfig.DefaultDBDownloadTimeout},
		"set":      {set: 2 * time.Minute, want: 2 * time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (Options{DownloadTimeout: tc.set}).downloadTimeout(); got != tc.want {
				t.Errorf("downloadTimeout() = %v, want %v", got, tc.want)
			}
		})
	}
}
