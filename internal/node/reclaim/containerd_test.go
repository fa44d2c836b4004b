package reclaim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
)

// TestLeaseChanged: a lease is deleted only while it is the one judged:
// the same making, labels (its expiry among them) and resources, in any
// order.
func TestLeaseChanged(t *testing.T) {
	made := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	judged := containerdrecords.Lease{ID: "1-abcd", CreatedAt: made, Labels: map[string]string{"containerd.io/gc.expire": "2026-12-06T12:00:00Z"},
		Resources: []containerdrecords.Resource{{Type: "content", ID: "sha256:a"}, {Type: "snapshots/overlayfs", ID: "s"}}}
	with := func(change func(*containerdrecords.Lease)) containerdrecords.Lease {
		l := judged
		l.Labels = map[string]string{"containerd.io/gc.expire": "2026-12-06T12:00:00Z"}
		l.Resources = append([]containerdrecords.Resource{}, judged.Resources...)
		change(&l)
		return l
	}
	cases := map[string]struct {
		judged *containerdrecords.Lease
		now    containerdrecords.Lease
		want   string
	}{
		"the same":                   {judged: &judged, now: with(func(*containerdrecords.Lease) {})},
		"the same, in another order": {judged: &judged, now: with(func(l *containerdrecords.Lease) { l.Resources[0], l.Resources[1] = l.Resources[1], l.Resources[0] })},
		"not read with it":           {now: judged, want: "its record was not read with it"},
		"made anew":                  {judged: &judged, now: with(func(l *containerdrecords.Lease) { l.CreatedAt = made.Add(time.Second) }), want: "made anew since the node was read"},
		"its expiry moved":           {judged: &judged, now: with(func(l *containerdrecords.Lease) { l.Labels["containerd.io/gc.expire"] = "2026-12-07T12:00:00Z" }), want: "its labels changed since the node was read"},
		"labelled flat since":        {judged: &judged, now: with(func(l *containerdrecords.Lease) { l.Labels["containerd.io/gc.flat"] = "" }), want: "its labels changed since the node was read"},
		"holding more": {judged: &judged, now: with(func(l *containerdrecords.Lease) {
			l.Resources = append(l.Resources, containerdrecords.Resource{Type: "content", ID: "sha256:b"})
		}),
			want: "what it holds changed since the node was read (2 resources then, 3 now)"},
		"holding other content": {judged: &judged, now: with(func(l *containerdrecords.Lease) { l.Resources[0].ID = "sha256:b" }),
			want: "what it holds changed since the node was read (2 resources then, 2 now)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, leaseChanged(c.judged, c.now)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
