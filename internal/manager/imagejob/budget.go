// The failure budget (manager.imageJob.maxFailedNodes): a run whose nodes
// fail beyond it stops creating pods, lets the running ones finish, and
// ends Failed with the nodes it never reached untouched.

package imagejob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// overBudget is whether more nodes failed than the budget allows of this
// many nodes. Nil is no budget. It is pure.
func overBudget(failed int, budget *config.MaxConcurrent, nodes int) bool {
	return budget != nil && failed > budget.Budget(nodes)
}

// reach is how many targets, in order, the waves may have reached by the
// end of this pass. Over the budget, none beyond those already started.
// With a budget and waves, the first wave is the canary: nothing beyond it
// starts until all of it finished within the budget, so that a bad image
// or configuration fails a wave's worth of nodes, not the window rolling
// on while the first failures come in. Without a budget the waves roll on
// as before: nothing would stop them anyway. It is pure.
func reach(p progress, limit int, budget *config.MaxConcurrent) int {
	switch {
	case overBudget(p.failed, budget, p.eligible):
		return min(p.started, p.eligible)
	case budget != nil && limit > 0 && limit < p.eligible:
		if p.started < limit || (p.started == limit && p.active > 0) {
			return limit
		}
	}
	return p.eligible
}

// within is the world as plan may see it: the targets it may reach.
func within(w world, n int) world {
	w.targets = w.targets[:n]
	return w
}

// budgetText describes the overrun with its counts.
func budgetText(p progress, budget *config.MaxConcurrent) string {
	return fmt.Sprintf("failure budget exceeded: %d of %d nodes failed, more than maxFailedNodes %s allows (%d)",
		p.failed, p.eligible, budgetSetting(budget), budget.Budget(p.eligible))
}

func budgetSetting(budget *config.MaxConcurrent) string {
	if budget.Percent > 0 {
		return fmt.Sprintf("%d%%", budget.Percent)
	}
	return fmt.Sprint(budget.Count)
}

// setDraining says why no more pods start while the running ones finish.
func setDraining(job *eraserv1.ImageJob, p progress, budget *config.MaxConcurrent) {
	setCondition(job, metav1.ConditionUnknown, eraserv1.ReasonRunning, fmt.Sprintf(
		"%s; no more worker pods are created, %d running are let finish, %d nodes will not be started",
		budgetText(p, budget), p.active, notStarted(p)))
}

// setOverrun explains a run ended by its budget: the counts, the nodes not
// started (counted as skipped) and the first failures (setFinished's).
func setOverrun(job *eraserv1.ImageJob, p progress, budget *config.MaxConcurrent) {
	finished := readyCondition(job).Message
	setCondition(job, metav1.ConditionFalse, eraserv1.ReasonFailureBudgetExceeded, truncate(fmt.Sprintf(
		"%s; %d nodes not started (counted as skipped); %s", budgetText(p, budget), notStarted(p), finished)))
}

// announceOverrun emits a Warning the first time this process sees the
// budget exceeded: the moment the run stops growing, which may be long
// before its running pods let it end. A restart may repeat it.
func (r *Reconciler) announceOverrun(job *eraserv1.ImageJob, st *jobState, p progress, budget *config.MaxConcurrent) {
	if st.overrun {
		return
	}
	st.overrun = true
	r.recorder.Eventf(job, corev1.EventTypeWarning, eraserv1.ReasonFailureBudgetExceeded,
		"%s; no more worker pods are created, %d running are let finish, %d nodes will not be started",
		budgetText(p, budget), p.active, notStarted(p))
}

// notStarted counts the nodes a halted run never starts: those it never
// reached and those that still wait for another run's worker.
func notStarted(p progress) int { return p.eligible - p.started + p.waiting }
