package wave

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestOverBudget: the run stops once more nodes failed than the budget
// allows, not when as many did; no budget never stops it.
func TestOverBudget(t *testing.T) {
	count := func(n int) *config.MaxConcurrent { return &config.MaxConcurrent{Count: n} }
	pct := func(n int) *config.MaxConcurrent { return &config.MaxConcurrent{Percent: n} }
	cases := map[string]struct {
		Failed, Nodes int
		budget        *config.MaxConcurrent
		want          bool
	}{
		"no budget, every node failed": {Failed: 10, Nodes: 10, want: false},
		"zero, none failed":            {Failed: 0, Nodes: 10, budget: count(0), want: false},
		"zero, one failed":             {Failed: 1, Nodes: 10, budget: count(0), want: true},
		"at the budget":                {Failed: 2, Nodes: 10, budget: count(2), want: false},
		"one over":                     {Failed: 3, Nodes: 10, budget: count(2), want: true},
		"5% of 100, 5 failed":          {Failed: 5, Nodes: 100, budget: pct(5), want: false},
		"5% of 100, 6 failed":          {Failed: 6, Nodes: 100, budget: pct(5), want: true},
		"10% of 5 rounds down to none": {Failed: 1, Nodes: 5, budget: pct(10), want: true},
		"100% never stops":             {Failed: 7, Nodes: 7, budget: pct(100), want: false},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		got[name], want[name] = OverBudget(tc.Failed, tc.budget, tc.Nodes), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("over budget (-want +got):\n%s", diff)
	}
}

// TestCanaryLimit: how far the waves may go. With a budget and waves the first
// wave is the canary; over the budget nothing more starts.
func TestCanaryLimit(t *testing.T) {
	one := &config.MaxConcurrent{Count: 1}
	cases := map[string]struct {
		p      Progress
		Limit  int
		budget *config.MaxConcurrent
		want   int
	}{
		"no budget: the waves roll on":            {p: Progress{Eligible: 10, Started: 3, Active: 3}, Limit: 3, want: 10},
		"no waves: every node":                    {p: Progress{Eligible: 10}, budget: one, want: 10},
		"waves as wide as the run: no canary":     {p: Progress{Eligible: 3}, Limit: 3, budget: one, want: 3},
		"canary not started":                      {p: Progress{Eligible: 10}, Limit: 3, budget: one, want: 3},
		"canary running, one failed":              {p: Progress{Eligible: 10, Started: 3, Active: 2, Failed: 1}, Limit: 3, budget: one, want: 3},
		"canary partly started (a refusal)":       {p: Progress{Eligible: 10, Started: 2, Failed: 1, Succeeded: 1}, Limit: 3, budget: one, want: 3},
		"canary done within the budget":           {p: Progress{Eligible: 10, Started: 3, Succeeded: 2, Failed: 1}, Limit: 3, budget: one, want: 10},
		"past the canary":                         {p: Progress{Eligible: 10, Started: 5, Active: 3, Succeeded: 2}, Limit: 3, budget: one, want: 10},
		"canary over the budget: no more":         {p: Progress{Eligible: 10, Started: 3, Active: 1, Failed: 2}, Limit: 3, budget: one, want: 3},
		"over the budget later: none beyond":      {p: Progress{Eligible: 10, Started: 6, Active: 2, Succeeded: 2, Failed: 2}, Limit: 3, budget: one, want: 6},
		"over the budget without waves":           {p: Progress{Eligible: 10, Started: 10, Failed: 2, Succeeded: 8}, budget: one, want: 10},
		"over the budget mid-canary, not started": {p: Progress{Eligible: 10, Started: 2, Active: 0, Failed: 2}, Limit: 3, budget: one, want: 2},
	}
	got, want := map[string]int{}, map[string]int{}
	for name, tc := range cases {
		got[name], want[name] = canaryLimit(tc.p, tc.Limit, tc.budget), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reach (-want +got):\n%s", diff)
	}
}
