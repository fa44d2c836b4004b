// Package wait polls a test's condition until it holds or a deadline
// passes. It needs neither an API server nor a runtime, so every tier and
// module uses the same poller; the deadline a caller gives is many times
// the usual wait, so that a loaded machine slows a test and does not fail
// it.
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Interval is how often a condition is tried.
const Interval = 100 * time.Millisecond

// Until tries cond every Interval until it holds or returns an error, and
// returns that error, or one once timeout has passed.
func Until(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not so after %v", timeout)
		}
		time.Sleep(Interval)
	}
}

// For waits until cond holds, and fails the test, naming what it waited
// for, once timeout has passed.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Until(timeout, func() (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// ForDetail is For with a condition that says why it does not hold yet:
// the failure shows the last such detail.
func ForDetail(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var detail string
	if err := Until(timeout, func() (bool, error) {
		var ok bool
		ok, detail = cond()
		return ok, nil
	}); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, detail)
	}
}
