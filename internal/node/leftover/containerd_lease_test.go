package leftover

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// TestJudgeLease: only a lease its client is done with (its expiry
// passed), or one of containerd's own pull and import clients older than
// the lease age, is an old lease; a lease held on purpose (no expiry,
// gc.flat, another client's shape) older than the lease age is listed as
// held, never reclaimed; a younger one is work in progress.
func TestJudgeLease(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	const age = time.Hour
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	content := []containerdrecords.Resource{{Type: "content", ID: digest("l")}, {Type: "ingests", ID: "ref"}, {Type: "snapshots/overlayfs", ID: "extract-1"}}
	// A pull's lease as containerd's client makes it, made ago.
	client := func(ago time.Duration) containerdrecords.Lease {
		return containerdrecords.Lease{ID: "581313127-uX_a", CreatedAt: now.Add(-ago), Labels: map[string]string{LabelExpire: at(24*time.Hour - ago)}, Resources: content}
	}
	with := func(l containerdrecords.Lease, change func(*containerdrecords.Lease)) containerdrecords.Lease {
		l.Labels = map[string]string{LabelExpire: l.Labels[LabelExpire]}
		change(&l)
		return l
	}
	type verdict struct {
		Kind leftoverkind.Kind
		Why  string // its first words
	}
	cases := map[string]struct {
		lease containerdrecords.Lease
		want  verdict
	}{
		"a pull under way":                     {lease: client(10 * time.Minute)},
		"a killed pull's, past the age":        {lease: client(2 * time.Hour), want: verdict{leftoverkind.OldLease, "a lease of containerd's own pull"}},
		"a killed pull's, at the age":          {lease: client(age)},
		"its client's clock a few seconds off": {lease: with(client(2*time.Hour), func(l *containerdrecords.Lease) { l.Labels[LabelExpire] = at(22*time.Hour + 5*time.Second) }), want: verdict{leftoverkind.OldLease, "a lease of containerd's own pull"}},
		"expired, however young": {lease: containerdrecords.Lease{ID: "anything", CreatedAt: now.Add(-time.Minute), Labels: map[string]string{LabelExpire: at(-time.Second), "tool": "x"}},
			want: verdict{leftoverkind.OldLease, "a lease whose expiry passed"}},
		"expiring now": {lease: containerdrecords.Lease{ID: "anything", CreatedAt: now.Add(-time.Minute), Labels: map[string]string{LabelExpire: at(0)}}, want: verdict{leftoverkind.OldLease, "a lease whose expiry passed"}},
		"Docker's container lease": {lease: containerdrecords.Lease{ID: strings.Repeat("c0ffee", 10) + "abcd", CreatedAt: now.Add(-48 * time.Hour), Resources: content[2:]},
			want: verdict{leftoverkind.HeldLease, "a lease without an expiry"}},
		"a young lease without expiry": {lease: containerdrecords.Lease{ID: "x", CreatedAt: now.Add(-time.Minute)}},
		"BuildKit's cache": {lease: containerdrecords.Lease{ID: "k2fpt4mztc2ubm2rph1l8c0xv", CreatedAt: now.Add(-48 * time.Hour), Labels: map[string]string{LabelFlat: at(-48 * time.Hour)}},
			want: verdict{leftoverkind.HeldLease, "a lease labelled containerd.io/gc.flat"}},
		"flat and expired": {lease: containerdrecords.Lease{ID: "x", CreatedAt: now.Add(-48 * time.Hour), Labels: map[string]string{LabelFlat: "", LabelExpire: at(-time.Hour)}},
			want: verdict{leftoverkind.HeldLease, "a lease labelled containerd.io/gc.flat"}},
		"an expiry containerd cannot read": {lease: containerdrecords.Lease{ID: "1-abcd", CreatedAt: now.Add(-48 * time.Hour), Labels: map[string]string{LabelExpire: "tomorrow"}},
			want: verdict{leftoverkind.HeldLease, "a lease whose expiry \"tomorrow\" is no time"}},
		"an ID of its own": {lease: with(client(2*time.Hour), func(l *containerdrecords.Lease) { l.ID = "nerdctl-build" }),
			want: verdict{leftoverkind.HeldLease, "a lease made 2h0m0s ago, expiring in 22h0m0s, unlike containerd's pull and import clients' by its ID:"}},
		"a label of another tool": {lease: with(client(2*time.Hour), func(l *containerdrecords.Lease) { l.Labels["buildkit/lease.temporary"] = "" }),
			want: verdict{leftoverkind.HeldLease, "a lease made 2h0m0s ago, expiring in 22h0m0s, unlike containerd's pull and import clients' by its labels buildkit/lease.temporary, containerd.io/gc.expire:"}},
		"a month's expiry": {lease: with(client(2*time.Hour), func(l *containerdrecords.Lease) { l.Labels[LabelExpire] = at(30 * 24 * time.Hour) }),
			want: verdict{leftoverkind.HeldLease, "a lease made 2h0m0s ago, expiring in 720h0m0s, unlike containerd's pull and import clients' by an expiry 722h0m0s after its making:"}},
		"an image held": {lease: with(client(2*time.Hour), func(l *containerdrecords.Lease) {
			l.Resources = []containerdrecords.Resource{{Type: "images", ID: "x"}}
		}),
			want: verdict{leftoverkind.HeldLease, "a lease made 2h0m0s ago, expiring in 22h0m0s, unlike containerd's pull and import clients' by what it holds:"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			kind, why := JudgeLease(c.lease, age, now)
			got := verdict{kind, why}
			if strings.HasPrefix(why, c.want.Why) {
				got.Why = c.want.Why
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
