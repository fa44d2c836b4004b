package worker

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWaitForHonoursLongTimeouts: a hand-off wait gets the whole
// --handoff-timeout the manager passes, also past the hour it was once
// capped at. The wait's own deadline is read instead of waiting it out.
func TestWaitForHonoursLongTimeouts(t *testing.T) {
	cases := map[string]struct {
		flag string
		want time.Duration
	}{
		"unset: the default":          {want: time.Hour},
		"the default scan's deadline": {flag: "23h40m0s", want: 23*time.Hour + 40*time.Minute},
		"a 47h scan":                  {flag: "47h40m0s", want: 47*time.Hour + 40*time.Minute},
		"ten minutes":                 {flag: "10m", want: 10 * time.Minute},
	}
	got, want := map[string]time.Duration{}, map[string]time.Duration{}
	for name, tc := range cases {
		var f Flags
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		f.Bind(fs)
		var args []string
		if tc.flag != "" {
			args = append(args, "--handoff-timeout="+tc.flag)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := f.WaitFor(context.Background(), "scanner", "no images from the", func(ctx context.Context) error {
			deadline, ok := ctx.Deadline()
			if !ok {
				t.Errorf("%s: the wait has no deadline", name)
			}
			// Rounded to the minute: the clock moved between start and here.
			got[name] = deadline.Sub(start).Round(time.Minute)
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wait deadlines (-want +got):\n%s", diff)
	}
}
