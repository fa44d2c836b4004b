package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCatchUpSwitch: manager.scheduling.catchUp is read in every version
// upstream shipped, on unless written false.
func TestCatchUpSwitch(t *testing.T) {
	docs := func(scheduling string) map[string]string {
		return map[string]string{
			VersionV1alpha1: "apiVersion: eraser.sh/v1alpha1\nmanager: {scheduling: " + scheduling + "}",
			VersionV1alpha2: "apiVersion: eraser.sh/v1alpha2\nmanager: {scheduling: " + scheduling + "}",
			VersionV1alpha3: "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: " + scheduling + "}",
		}
	}
	cases := map[string]struct {
		scheduling string
		want       bool
	}{
		"default on":         {scheduling: "{}", want: true},
		"off":                {scheduling: "{catchUp: false}", want: false},
		"on, with the batch": {scheduling: "{catchUp: true, catchUpBatch: 5m}", want: true},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		for version, doc := range docs(tc.scheduling) {
			cfg, _, err := Parse([]byte(doc))
			if err != nil {
				t.Errorf("%s, %s: %v", name, version, err)
				continue
			}
			got[name+", "+version], want[name+", "+version] = cfg.Manager.Scheduling.CatchUp, tc.want
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catchUp (-want +got):\n%s", diff)
	}
}
