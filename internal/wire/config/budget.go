package config

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Budget resolves a failure budget for a number of nodes: how many may fail
// before the run stops. A percentage rounds down, so that the budget never
// tolerates more failures than the percentage says ("10%" of 5 nodes is 0:
// the first failure stops the run).
func (m MaxConcurrent) Budget(nodes int) int {
	if m.Percent > 0 {
		return nodes * m.Percent / 100
	}
	return m.Count
}

// maxFailed parses manager.imageJob.maxFailedNodes as maxConcurrent does,
// except that zero is a budget (no failure tolerated), not "unset": unset
// (nil) is no budget at all, as upstream runs every node whatever fails.
func (c *converter) maxFailed(p *field.Path, s scalar) *MaxConcurrent {
	str := string(s)
	if str == "" {
		return nil
	}
	if pct, ok := strings.CutSuffix(str, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil || n < 0 || n > 100 {
			c.errs = append(c.errs, field.Invalid(p, str, "a percentage must be between 0% and 100%"))
			return nil
		}
		return &MaxConcurrent{Percent: n}
	}
	n, err := strconv.Atoi(str)
	if err != nil || n < 0 {
		c.errs = append(c.errs, field.Invalid(p, str, `must be a number of nodes ("3") or a percentage of them ("5%")`))
		return nil
	}
	return &MaxConcurrent{Count: n}
}

// DefaultMaxWorkerPods is manager.imageJob.maxWorkerPods when unset: enough
// for a 1,000-node run to fan out at once (make bench-manager), while eight
// runs arriving together on 5,000 nodes create pods as others finish
// instead of 40,000 at once.
const DefaultMaxWorkerPods = 1000

// maxConcurrent reads a count ("50") or a percentage ("10%").
func (c *converter) maxConcurrent(p *field.Path, s scalar) MaxConcurrent {
	str := string(s)
	if str == "" || str == "0" {
		return MaxConcurrent{}
	}
	if pct, ok := strings.CutSuffix(str, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil || n < 1 || n > 100 {
			c.errs = append(c.errs, field.Invalid(p, str, "a percentage must be between 1% and 100%"))
			return MaxConcurrent{}
		}
		return MaxConcurrent{Percent: n}
	}
	n, err := strconv.Atoi(str)
	if err != nil || n < 0 {
		c.errs = append(c.errs, field.Invalid(p, str, `must be a number of nodes ("50") or a percentage of them ("10%")`))
		return MaxConcurrent{}
	}
	return MaxConcurrent{Count: n}
}
