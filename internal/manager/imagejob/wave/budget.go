// The failure budget (manager.imageJob.maxFailedNodes): a run whose nodes
// fail beyond it stops creating pods, lets the running ones finish, and
// ends Failed with the nodes it never reached untouched.

package wave

import (
	"fmt"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// OverBudget is whether more nodes failed than the budget allows of this
// many nodes. Nil is no budget.
func OverBudget(failed int, budget *config.MaxConcurrent, nodes int) bool {
	return budget != nil && failed > budget.Budget(nodes)
}

// canaryLimit is how many targets, in order, the waves may have reached by the
// end of this pass. Over the budget, none beyond those already started.
// With a budget and waves, the first wave is the canary: nothing beyond it
// starts until all of it finished within the budget, so that a bad image
// or configuration fails a wave's worth of nodes, not the window rolling
// on while the first failures come in. Without a budget the waves roll on
// as before: nothing would stop them anyway.
func canaryLimit(p Progress, limit int, budget *config.MaxConcurrent) int {
	switch {
	case OverBudget(p.Failed, budget, p.Eligible):
		return min(p.Started, p.Eligible)
	case budget != nil && limit > 0 && limit < p.Eligible:
		if p.Started < limit || (p.Started == limit && p.Active > 0) {
			return limit
		}
	}
	return p.Eligible
}

// limitTargets is the snapshot as plan may see it: the targets it may reach.
func limitTargets(w Snapshot, n int) Snapshot {
	w.Targets = w.Targets[:n]
	return w
}

// BudgetText describes the overrun with its counts.
func BudgetText(p Progress, budget *config.MaxConcurrent) string {
	return fmt.Sprintf("failure budget exceeded: %d of %d nodes failed, more than maxFailedNodes %s allows (%d)",
		p.Failed, p.Eligible, budgetSetting(budget), budget.Budget(p.Eligible))
}

func budgetSetting(budget *config.MaxConcurrent) string {
	if budget.Percent > 0 {
		return fmt.Sprintf("%d%%", budget.Percent)
	}
	return fmt.Sprint(budget.Count)
}

// NotStarted counts the nodes a halted run never starts: those it never
// reached and those that still wait for another run's worker.
func NotStarted(p Progress) int { return p.Eligible - p.Started + p.Waiting }
