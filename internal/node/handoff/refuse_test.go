package handoff

// What a peer that can write the shared directory may put where an
// endpoint or the collector's record should be: a link to a file the
// signalling side can write (a runtime's store file), a regular file, a
// link to another endpoint. Every side refuses it, saying why, and leaves
// the file as it was.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// storeFile stands for a file of the runtime's store (CRI-O's layers.json)
// in a directory of its own, as the remover sees it where it reclaims
// CRI-O's leftovers: root, and the file writable.
func storeFile(t *testing.T) (path string, content []byte) {
	t.Helper()
	path = filepath.Join(tempDir(t), "layers.json")
	content = []byte(`[{"id":"` + strings.Repeat("a", 64) + `","parent":"","created":"2026-12-01T00:00:00Z"}]`)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

// tempDir is t.TempDir without its check that the directory was removed,
// which Wine cannot remove the way Go asks it to.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ho")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// symlink makes a link, or skips where the platform makes none a program
// can see as one: Windows lets no one but an administrator make one, and
// Wine's are not Windows' links.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	err := os.Symlink(target, link)
	if err == nil && runtime.GOOS == "windows" {
		if st, lerr := os.Lstat(link); lerr != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Skipf("the link made here is not one (lstat: %v)", lerr)
		}
	}
	if err != nil {
		if runtime.GOOS == "windows" {
			t.Skipf("no symbolic links here: %v", err)
		}
		t.Fatal(err)
	}
}

func checkUnchanged(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed: %q, was %q", path, got, want)
	}
}

// TestSignalRefusesWhatIsNotAnEndpoint: the remover signals completion on
// endpoints its peers created, in a directory they can write. A link there
// is never followed, whatever it names, and a file that is not an endpoint
// is never written.
func TestSignalRefusesWhatIsNotAnEndpoint(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		cases := map[string]struct {
			plant func(t *testing.T, endpoint string) (check func(t *testing.T))
			want  string
		}{
			"a link to a store file": {
				plant: func(t *testing.T, endpoint string) func(t *testing.T) {
					store, content := storeFile(t)
					symlink(t, store, endpoint)
					return func(t *testing.T) { checkUnchanged(t, store, content) }
				},
				want: "symbolic link",
			},
			"a regular file": {
				plant: func(t *testing.T, endpoint string) func(t *testing.T) {
					content := []byte("not an endpoint")
					if err := os.WriteFile(endpoint, content, 0o600); err != nil {
						t.Fatal(err)
					}
					return func(t *testing.T) { checkUnchanged(t, endpoint, content) }
				},
				want: "is a regular file",
			},
			"a link to another waiter's endpoint": {
				plant: func(t *testing.T, endpoint string) func(t *testing.T) {
					other := Path(dir, "other")
					c, err := tr.PublishCompletion(other)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = c.Close() })
					symlink(t, other, endpoint)
					return func(t *testing.T) {
						ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
						defer cancel()
						if err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("the other waiter's wait ended with %v; nothing should have reached it", err)
						}
					}
				},
				want: "symbolic link",
			},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				endpoint := Path(dir, EraseCompleteScan)
				t.Cleanup(func() { _ = os.Remove(endpoint) })
				check := tc.plant(t, endpoint)
				err := tr.SignalCompletion(ctxTimeout(t, 5*time.Second), endpoint)
				if !errors.Is(err, ErrNotEndpoint) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("signal: %v; want it refused (%v), saying %q", err, ErrNotEndpoint, tc.want)
				}
				check(t)
			})
		}
	})
}

// TestSendRefusesALink: a sender never follows a link where its peer's
// endpoint should be.
func TestSendRefusesALink(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		endpoint := Path(dir, ScanErase)
		store, content := storeFile(t)
		symlink(t, store, endpoint)
		if err := tr.SendImages(ctxTimeout(t, 5*time.Second), endpoint, sample); err == nil {
			t.Error("sent images through a link")
		}
		checkUnchanged(t, store, content)
	})
}

// TestWaitRefusesASwappedEndpoint: a FIFO waiter reads its endpoint by
// name; one swapped for a link after it was published is refused, not read
// through. (A socket waiter accepts on the listener it holds, whatever the
// name then holds.)
func TestWaitRefusesASwappedEndpoint(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		if tr.Name() != "fifo" {
			t.Skip("a socket waiter never opens its endpoint by name")
		}
		endpoint := Path(dir, EraseCompleteCollect)
		c, err := tr.PublishCompletion(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		decoy := Path(dir, "decoy")
		d, err := tr.PublishCompletion(decoy)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := os.Remove(endpoint); err != nil {
			t.Fatal(err)
		}
		symlink(t, decoy, endpoint)
		ctx := ctxTimeout(t, 5*time.Second)
		go func() { _ = tr.send(ctx, decoy, []byte(CompleteToken)) }()
		if err := c.Wait(ctx); !errors.Is(err, ErrNotEndpoint) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("wait: %v; want the link refused (%v)", err, ErrNotEndpoint)
		}
	})
}

// TestReadCollectedRefuses: the collector's record is read only as the
// regular file the collector renamed into place: a link the scanner put
// there is not read through, and a FIFO does not hold the reader.
func TestReadCollectedRefuses(t *testing.T) {
	cases := map[string]struct {
		plant func(t *testing.T, record string)
		want  string
	}{
		"a link to another list": {
			plant: func(t *testing.T, record string) {
				other := filepath.Join(tempDir(t), "wider.json")
				data, _ := Encode(sample)
				if err := os.WriteFile(other, data, 0o600); err != nil {
					t.Fatal(err)
				}
				symlink(t, other, record)
			},
			want: "symbolic link",
		},
		"a directory": {
			plant: func(t *testing.T, record string) {
				if err := os.Mkdir(record, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			want: "is a directory",
		},
		"a FIFO": {
			plant: func(t *testing.T, record string) {
				if runtime.GOOS == "windows" {
					t.Skip("no FIFOs on Windows")
				}
				if out, err := exec.Command("mkfifo", record).CombinedOutput(); err != nil {
					t.Fatalf("mkfifo: %v: %s", err, out)
				}
			},
			want: "is a FIFO",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			tc.plant(t, filepath.Join(dir, Collected))
			done := make(chan error, 1)
			go func() { _, err := ReadCollected(dir); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotEndpoint) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("read: %v; want it refused (%v), saying %q", err, ErrNotEndpoint, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the read is held by what is at the record's path")
			}
		})
	}
}
