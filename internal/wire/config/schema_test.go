package config

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The schema is every version's keys at once, each object closed.
func TestSchema(t *testing.T) {
	s := Schema()
	at := func(path ...string) map[string]any {
		t.Helper()
		cur := s
		for _, p := range path {
			props, ok := cur["properties"].(map[string]any)
			if !ok {
				t.Fatalf("%v: no properties at %s", path, p)
			}
			cur, ok = props[p].(map[string]any)
			if !ok {
				t.Fatalf("%v: no %s", path, p)
			}
		}
		return cur
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m["properties"].(map[string]any) {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff([]string{"collector", "eraser", "remover", "scanner"}, keys(at("components"))); diff != "" {
		t.Errorf("components: v1alpha1's eraser and the later remover (-want +got):\n%s", diff)
	}
	runtime := at("manager", "runtime")
	if alts, ok := runtime["anyOf"].([]any); !ok || len(alts) != 2 {
		t.Errorf("manager.runtime: want v1alpha1's name or v1alpha3's object, got %v", runtime)
	}
	for _, path := range [][]string{{}, {"manager"}, {"manager", "imageJob"}, {"manager", "retention"}, {"components", "scanner"}} {
		if v := at(path...)["additionalProperties"]; v != false {
			t.Errorf("%v is not closed: additionalProperties %v", path, v)
		}
	}
	for _, ignored := range []string{"health", "metrics", "webhook", "leaderElection"} {
		if len(at(ignored)) != 0 {
			t.Errorf("%s: upstream's key without effect takes anything, got %v", ignored, at(ignored))
		}
	}
	if _, ok := at("manager", "additionalPodLabels")["additionalProperties"].(map[string]any); !ok {
		t.Error("manager.additionalPodLabels: want a map of strings")
	}
}
