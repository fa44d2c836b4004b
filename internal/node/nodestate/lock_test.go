package nodestate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The same tests run against flock (Linux) and LockFileEx (Windows, under
// Wine in the Windows tier): whichever lock_*.go the platform builds.

// helperEnv makes the test binary a writer process (TestMain), so that the
// lock is shown to exclude other processes, not only other goroutines.
const helperEnv = "NODESTATE_TEST_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		if err := writerProcess(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writerProcess runs writer "<dir>,<writer>,<writers>,<rounds>".
func writerProcess(spec string) error {
	f := strings.Split(spec, ",")
	if len(f) != 4 {
		return fmt.Errorf("writer spec %q", spec)
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(f[i+1])
		if err != nil {
			return fmt.Errorf("writer spec %q: %w", spec, err)
		}
		n[i] = v
	}
	return writer(f[0], n[0], n[1], n[2])
}

var lockT0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func writerImages(writers int) []string {
	ids := make([]string, writers)
	for i := range ids {
		ids[i] = fmt.Sprintf("sha256:%02d", i)
	}
	return ids
}

// writer is one of writers workers: for each round it reads the node (all
// writers' images present) at a time no other reading shares, seeing its
// own image in use, and merges that under the lock. A lost update shows as
// an image whose last use is not its writer's last round.
func writer(dir string, w, writers, rounds int) error {
	ids := writerImages(writers)
	for k := 1; k <= rounds; k++ {
		at := lockT0.Add(time.Duration(k*writers+w) * time.Second)
		err := Update(dir, time.Minute, func(s *State) {
			s.Observe(at, ids, func(i int) bool { return i == w })
		})
		if err != nil {
			return fmt.Errorf("writer %d round %d: %w", w, k, err)
		}
	}
	return nil
}

func wantAfterWriters(writers, rounds int) map[string]Entry {
	want := map[string]Entry{}
	for w, id := range writerImages(writers) {
		want[id] = Entry{FirstSeen: lockT0.Add(time.Duration(writers) * time.Second), LastUsed: lockT0.Add(time.Duration(rounds*writers+w) * time.Second)}
	}
	return want
}

func entries(s *State) map[string]Entry {
	got := map[string]Entry{}
	for id := range s.images {
		got[id] = s.Get(id)
	}
	return got
}

// TestConcurrentWritersLoseNothing: goroutines and separate processes
// update one state file at once; every writer's last update is in it.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs, goroutines, rounds = 3, 4, 15
	writers := procs + goroutines
	dir := tempDir(t)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range procs {
		wg.Go(func() {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%d", helperEnv, dir, w, writers, rounds))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[w] = fmt.Errorf("writer process %d: %w\n%s", w, err, out)
			}
		})
	}
	for w := procs; w < writers; w++ {
		wg.Go(func() { errs[w] = writer(dir, w, writers, rounds) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantAfterWriters(writers, rounds), entries(s)); diff != "" {
		t.Errorf("state after %d writers of %d rounds (-want +got):\n%s", writers, rounds, diff)
	}
}

func TestLockWaitIsBounded(t *testing.T) {
	dir := tempDir(t)
	held, err := AcquireLock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const wait = 300 * time.Millisecond
	start := time.Now()
	second, err := AcquireLock(dir, wait)
	took := time.Since(start)
	if err == nil {
		_ = second.Release()
		t.Fatal("a second holder got the lock")
	}
	if !errors.Is(err, ErrLockTimeout) || !strings.Contains(err.Error(), LockPath(dir)) || !strings.Contains(err.Error(), "waited ") {
		t.Errorf("error %q: want ErrLockTimeout naming %s and the wait", err, LockPath(dir))
	}
	if took < wait || took > wait+5*time.Second {
		t.Errorf("gave up after %s, want about %s", took, wait)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := AcquireLock(dir, wait)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestLockWaitsForRelease(t *testing.T) {
	dir := tempDir(t)
	held, err := AcquireLock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		released <- held.Release()
	}()
	second, err := AcquireLock(dir, time.Minute)
	if err != nil {
		t.Fatalf("waiting for a release: %v", err)
	}
	if err := errors.Join(<-released, second.Release(), second.Release()); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseOnFailedLoad: a damaged file fails the load and leaves the
// lock free, so the next worker gets the same clear error, not a timeout.
func TestReleaseOnFailedLoad(t *testing.T) {
	dir := tempDir(t)
	if err := os.WriteFile(Path(dir), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := LoadLocked(dir, 200*time.Millisecond); err == nil || errors.Is(err, ErrLockTimeout) {
			t.Fatalf("LoadLocked of a damaged file: %v, want the file's error", err)
		}
	}
}
