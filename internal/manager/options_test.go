package manager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPullSecretNamesFromEnv: ERASER_PULL_SECRET_NAMES is read as upstream
// read it, a comma-separated list, without the spaces and empty entries no
// Secret's name can have.
func TestPullSecretNamesFromEnv(t *testing.T) {
	cases := map[string]struct {
		env  string
		want []string
	}{
		"unset":           {},
		"one":             {env: "regcred", want: []string{"regcred"}},
		"several":         {env: "regcred,mirror-cred", want: []string{"regcred", "mirror-cred"}},
		"spaces":          {env: " regcred , mirror-cred ", want: []string{"regcred", "mirror-cred"}},
		"empty entries":   {env: "regcred,,mirror-cred,", want: []string{"regcred", "mirror-cred"}},
		"only separators": {env: " , ,"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("ERASER_PULL_SECRET_NAMES", tc.env)
			var o Options
			o.FromEnv()
			if diff := cmp.Diff(tc.want, o.PullSecrets); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
