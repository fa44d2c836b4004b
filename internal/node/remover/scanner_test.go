package remover

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSender: whose list a scheduled run's remover takes is decided by
// --scanner alone; unset or misspelt, it takes none rather than guess.
func TestSender(t *testing.T) {
	type outcome struct {
		Sender string
		Err    bool
	}
	want := map[string]outcome{
		"enabled":  {Sender: "scanner"},
		"disabled": {Sender: "collector"},
		"":         {Err: true},
		"true":     {Err: true},
		"Enabled":  {Err: true},
	}
	got := map[string]outcome{}
	for flag := range want {
		s, err := Sender(flag)
		got[flag] = outcome{Sender: s, Err: err != nil}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sender (-want +got):\n%s", diff)
	}
}
