package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMaxFailedNodes: the failure budget is read in every version, as
// maxConcurrentNodes is; unset is no budget, while 0 and 0% are a budget of
// none (the first failure stops the run).
func TestMaxFailedNodes(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want *MaxConcurrent
	}{
		"unset: no budget":     {doc: "apiVersion: eraser.sh/v1alpha3\n"},
		"null: no budget":      {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxFailedNodes: null}}"},
		"a count":              {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxFailedNodes: 3}}", want: &MaxConcurrent{Count: 3}},
		"a quoted count":       {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxFailedNodes: '3'}}", want: &MaxConcurrent{Count: 3}},
		"zero is a budget":     {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxFailedNodes: 0}}", want: &MaxConcurrent{}},
		"a percentage":         {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxFailedNodes: 5%}}", want: &MaxConcurrent{Percent: 5}},
		"0%":                   {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxFailedNodes: 0%}}", want: &MaxConcurrent{}},
		"v1alpha2 as well":     {doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {imageJob: {maxFailedNodes: 2}}", want: &MaxConcurrent{Count: 2}},
		"v1alpha1 as well":     {doc: "apiVersion: eraser.sh/v1alpha1\nmanager: {imageJob: {maxFailedNodes: 10%}}", want: &MaxConcurrent{Percent: 10}},
		"beside the wave size": {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxConcurrentNodes: 10, maxFailedNodes: 1}}", want: &MaxConcurrent{Count: 1}},
	}
	got, want := map[string]*MaxConcurrent{}, map[string]*MaxConcurrent{}
	for name, tc := range cases {
		cfg, _, err := Parse([]byte(tc.doc))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got[name], want[name] = cfg.Manager.ImageJob.MaxFailedNodes, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("maxFailedNodes (-want +got):\n%s", diff)
	}
}

// TestMaxFailedNodesInvalid: a bad budget is refused with its field path,
// never read as "no budget".
func TestMaxFailedNodesInvalid(t *testing.T) {
	cases := map[string]struct {
		value string
		want  []string
	}{
		"a word":        {value: "lots", want: []string{"manager.imageJob.maxFailedNodes", `"lots"`, "percentage"}},
		"negative":      {value: "-1", want: []string{"manager.imageJob.maxFailedNodes", "number of nodes"}},
		"over 100%":     {value: "150%", want: []string{"manager.imageJob.maxFailedNodes", "between 0% and 100%"}},
		"a fraction":    {value: "2.5", want: []string{"manager.imageJob.maxFailedNodes"}},
		"a fraction %":  {value: "0.5%", want: []string{"manager.imageJob.maxFailedNodes", "between 0% and 100%"}},
		"a misspelling": {value: "'3' , maxFailedNode: 3", want: []string{"manager.imageJob.maxFailedNode", `did you mean "maxFailedNodes"?`}},
	}
	got, want := map[string][]string{}, map[string][]string{}
	for name, tc := range cases {
		_, _, err := Parse([]byte("apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxFailedNodes: " + tc.value + "}}"))
		want[name] = tc.want
		if err == nil {
			got[name] = []string{"accepted"}
			continue
		}
		for _, s := range tc.want {
			if strings.Contains(err.Error(), s) {
				got[name] = append(got[name], s)
			} else {
				got[name] = append(got[name], "missing from: "+err.Error())
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestBudget: a percentage of the eligible nodes rounds down, so the budget
// is never looser than written; a count is a count, however few the nodes.
func TestBudget(t *testing.T) {
	cases := map[string]struct {
		m     MaxConcurrent
		nodes int
		want  int
	}{
		"zero":               {m: MaxConcurrent{}, nodes: 100, want: 0},
		"a count":            {m: MaxConcurrent{Count: 3}, nodes: 100, want: 3},
		"a count over nodes": {m: MaxConcurrent{Count: 30}, nodes: 10, want: 30},
		"a percentage":       {m: MaxConcurrent{Percent: 5}, nodes: 1000, want: 50},
		"rounds down":        {m: MaxConcurrent{Percent: 10}, nodes: 25, want: 2},
		"down to none":       {m: MaxConcurrent{Percent: 10}, nodes: 5, want: 0},
		"100%":               {m: MaxConcurrent{Percent: 100}, nodes: 7, want: 7},
	}
	got, want := map[string]int{}, map[string]int{}
	for name, tc := range cases {
		got[name], want[name] = tc.m.Budget(tc.nodes), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budget (-want +got):\n%s", diff)
	}
}

// TestMaxWorkerPods: the cluster-wide bound on worker pods is read in every
// version; unset is the default, 0 no bound, a negative count refused.
func TestMaxWorkerPods(t *testing.T) {
	cases := map[string]struct {
		doc     string
		want    int
		invalid bool
	}{
		"unset: the default": {doc: "apiVersion: eraser.sh/v1alpha3\n", want: DefaultMaxWorkerPods},
		"null: the default":  {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxWorkerPods: null}}", want: DefaultMaxWorkerPods},
		"a count":            {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxWorkerPods: 200}}", want: 200},
		"zero: no bound":     {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxWorkerPods: 0}}", want: 0},
		"v1alpha1 as well":   {doc: "apiVersion: eraser.sh/v1alpha1\nmanager: {imageJob: {maxWorkerPods: 7}}", want: 7},
		"negative":           {doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {imageJob: {maxWorkerPods: -1}}", invalid: true},
	}
	type result struct {
		Pods    int
		Invalid bool
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		want[name] = result{Pods: tc.want, Invalid: tc.invalid}
		cfg, _, err := Parse([]byte(tc.doc))
		switch {
		case err != nil && strings.Contains(err.Error(), "manager.imageJob.maxWorkerPods"):
			got[name] = result{Invalid: true}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		default:
			got[name] = result{Pods: cfg.Manager.ImageJob.MaxWorkerPods}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("maxWorkerPods (-want +got):\n%s", diff)
	}
}
