package jobdata

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReferenceSetOf: a part's set is read back from the name
// ReferencesName gives it, and nothing else is taken for one.
func TestReferenceSetOf(t *testing.T) {
	type result struct {
		Set string
		OK  bool
	}
	cases := map[string]struct {
		job, name string
		want      result
	}{
		"a part":                        {job: "j", name: ReferencesName("j", "0123456789abcdef", 1), want: result{"0123456789abcdef", true}},
		"a later part":                  {job: "j", name: ReferencesName("j", "0123456789abcdef", 12), want: result{"0123456789abcdef", true}},
		"the incomplete set":            {job: "j", name: ReferencesName("j", "incomplete", 1), want: result{"incomplete", true}},
		"a job whose name holds -refs-": {job: "a-refs-b", name: ReferencesName("a-refs-b", "ff", 2), want: result{"ff", true}},
		"another job's part":            {job: "j", name: ReferencesName("k", "ff", 1)},
		"a job whose name starts so":    {job: "j", name: ReferencesName("j-2", "ff", 1)},
		"no part number":                {job: "j", name: "j-refs-ff"},
		"a part number that is not one": {job: "j", name: "j-refs-ff-x"},
		"the job's other data":          {job: "j", name: "j-nodes"},
		"an empty set":                  {job: "j", name: "j-refs--1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			set, ok := ReferenceSetOf(tc.job, tc.name)
			if diff := cmp.Diff(tc.want, result{set, ok}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
