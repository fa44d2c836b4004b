package wave

import (
	"cmp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/util/textcut"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// maxRegretRecent is how many returns the job's status names: the newest
// across its nodes (the CRD's bound).
const maxRegretRecent = 5

// addRegret adds a node's returns to the job's totals, as AddResults adds
// its removals: by policy, in policyOrder, a policy outside it left out
// (a newer worker's; the CRD would refuse it) but counted in the totals.
// A dry run's returns count: the images came back all the same.
func addRegret(total *eraserv1.ImageResults, s *workerresult.Summary) {
	r := s.Regret
	if r == nil || r.Returns == 0 {
		return
	}
	if total.Regret == nil {
		total.Regret = &eraserv1.RegretResults{}
	}
	t := total.Regret
	t.Returns += int64(r.Returns)
	t.BytesReturned += int64(r.BytesReturned)
	for i, p := range policyOrder {
		n, ok := r.ByPolicy[string(p)]
		if !ok || n.Returns == 0 {
			continue
		}
		j := slices.IndexFunc(t.Policies, func(r eraserv1.PolicyRegret) bool { return r.Policy == p })
		if j < 0 {
			j = len(t.Policies)
			for k, r := range t.Policies {
				if slices.Index(policyOrder, r.Policy) > i {
					j = k
					break
				}
			}
			t.Policies = slices.Insert(t.Policies, j, eraserv1.PolicyRegret{Policy: p})
		}
		t.Policies[j].Returns += int64(n.Returns)
		t.Policies[j].BytesReturned += int64(n.Bytes)
	}
	for _, e := range r.Recent {
		t.Recent = append(t.Recent, eraserv1.RegretReturn{Node: textcut.Cut(s.Node, 253), Image: textcut.Cut(e.Image, 256), Repository: textcut.Cut(e.Repository, 256),
			Bytes: int64(e.Bytes), Policy: textcut.Cut(e.Policy, 64), Run: textcut.Cut(e.Run, 253),
			RemovedAt: metav1.NewTime(e.RemovedAt), ReturnedAt: metav1.NewTime(e.ReturnedAt)})
	}
	// Newest first, by node and image among equals, so that the status is
	// the same whatever order the nodes finished in.
	slices.SortStableFunc(t.Recent, func(a, b eraserv1.RegretReturn) int {
		return cmp.Or(b.ReturnedAt.Compare(a.ReturnedAt.Time), strings.Compare(a.Node, b.Node), strings.Compare(a.Image, b.Image))
	})
	t.Recent = t.Recent[:min(len(t.Recent), maxRegretRecent)]
}

// RegretUnknownPolicy is the metrics' reason for returns whose removal's
// policy is not known.
const RegretUnknownPolicy = "Unknown"

// regretCounts is a node's returns for the metrics, by the policy that had
// removed them.
func regretCounts(s *workerresult.Summary) map[string]metrics.RegretCount {
	if s == nil || s.Regret == nil || s.Regret.Returns == 0 {
		return nil
	}
	out := map[string]metrics.RegretCount{}
	rest := metrics.RegretCount{Returns: int64(s.Regret.Returns), Bytes: int64(s.Regret.BytesReturned)}
	for p, t := range s.Regret.ByPolicy {
		out[p] = metrics.RegretCount{Returns: int64(t.Returns), Bytes: int64(t.Bytes)}
		rest.Returns -= int64(t.Returns)
		rest.Bytes -= int64(t.Bytes)
	}
	// Returns whose policy the ledger did not know.
	if rest.Returns > 0 {
		out[RegretUnknownPolicy] = metrics.RegretCount{Returns: rest.Returns, Bytes: max(rest.Bytes, 0)}
	}
	return out
}
