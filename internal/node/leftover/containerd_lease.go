package leftover

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// containerd's lease labels: the garbage collector drops a lease whose
// expiry passed, and holds a flat lease's snapshots without their parents.
const (
	LabelExpire = "containerd.io/gc.expire"
	LabelFlat   = "containerd.io/gc.flat"
)

// containerd's own clients (its Go client's WithLease, which the CRI's
// pulls, ctr, nerdctl and the transfer service use) make a pull's or an
// import's lease with a random ID, "<nanoseconds>-<3 random bytes in URL
// base64>", and the one label of an expiry a day after its making.
var clientLeaseID = regexp.MustCompile(`^[0-9]{1,9}-[A-Za-z0-9_-]{4}$`)

const (
	clientLeaseExpiry = 24 * time.Hour
	// The expiry is the client's clock, in whole seconds, the making
	// containerd's: a minute covers both.
	clientExpirySlack = time.Minute
)

// JudgeLease tells what a lease is, now: an old lease (its expiry passed,
// or it has the shape of containerd's own pull and import clients' and is
// older than leaseAge), a held lease (older than leaseAge, and held on
// purpose: never reclaimed), or neither (""): work in progress. why says
// which, for the listing.
func JudgeLease(l containerdrecords.Lease, leaseAge time.Duration, now time.Time) (leftoverkind.Kind, string) {
	age := now.Sub(l.CreatedAt)
	made := fmt.Sprintf("made %s ago", age.Round(time.Second))
	old := age > leaseAge
	if _, ok := l.Labels[LabelFlat]; ok {
		if !old {
			return "", ""
		}
		// BuildKit's cache records and build leases are flat, without expiry.
		return leftoverkind.HeldLease, "a lease labelled " + LabelFlat + ", " + made + ": BuildKit holds its cache so, on purpose; never reclaimed"
	}
	v, ok := l.Labels[LabelExpire]
	if !ok {
		if !old {
			return "", ""
		}
		return leftoverkind.HeldLease, "a lease without an expiry, " + made + ": its client holds what it names on purpose (Docker a container's writable layer, BuildKit its cache) and ends it itself; never reclaimed"
	}
	expiry, err := time.Parse(time.RFC3339, v)
	switch {
	case err != nil:
		if !old {
			return "", ""
		}
		return leftoverkind.HeldLease, fmt.Sprintf("a lease whose expiry %q is no time containerd reads, so that it never expires, %s: its client's to end; never reclaimed", v, made)
	case !expiry.After(now):
		return leftoverkind.OldLease, fmt.Sprintf("a lease whose expiry passed %s ago: its client is done with it, and containerd drops it at its next collection", now.Sub(expiry).Round(time.Second))
	case !old:
		return "", ""
	case len(unlikeClient(l, expiry)) > 0:
		return leftoverkind.HeldLease, fmt.Sprintf("a lease %s, expiring in %s, unlike containerd's pull and import clients' by %s: its client's to end, or containerd's at its expiry; never reclaimed",
			made, expiry.Sub(now).Round(time.Second), strings.Join(unlikeClient(l, expiry), ", "))
	default:
		return leftoverkind.OldLease, fmt.Sprintf("a lease of containerd's own pull and import clients, %s, which such a client ends within minutes: one killed first left it (it expires in %s)", made, expiry.Sub(now).Round(time.Second))
	}
}

// unlikeClient says how a lease differs from a pull's or an import's of
// containerd's own clients, as they make it: its random ID, the one label
// of its expiry a day after its making, and only content, ingests and
// snapshots held; nothing when it does not.
func unlikeClient(l containerdrecords.Lease, expiry time.Time) []string {
	var out []string
	if !clientLeaseID.MatchString(l.ID) {
		out = append(out, "its ID")
	}
	if len(l.Labels) != 1 {
		out = append(out, "its labels "+strings.Join(slices.Sorted(maps.Keys(l.Labels)), ", "))
	}
	if d := expiry.Sub(l.CreatedAt) - clientLeaseExpiry; d > clientExpirySlack || -d > clientExpirySlack {
		out = append(out, fmt.Sprintf("an expiry %s after its making", expiry.Sub(l.CreatedAt).Round(time.Second)))
	}
	if slices.ContainsFunc(l.Resources, func(r containerdrecords.Resource) bool {
		return r.Type != "content" && r.Type != "ingests" && !strings.HasPrefix(r.Type, "snapshots/")
	}) {
		out = append(out, "what it holds")
	}
	return out
}
