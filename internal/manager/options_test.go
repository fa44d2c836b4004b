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

func TestScanServiceURL(t *testing.T) {
	for name, tc := range map[string]struct {
		addr, ip, want string
	}{
		"default port":         {addr: ":8890", ip: "10.244.1.7", want: "http://10.244.1.7:8890"},
		"an IPv6 pod":          {addr: ":8890", ip: "fd00::7", want: "http://[fd00::7]:8890"},
		"turned off":           {addr: "0", ip: "10.244.1.7"},
		"no POD_IP":            {addr: ":8890"},
		"a port the OS picks":  {addr: ":0", ip: "10.244.1.7"},
		"an address with host": {addr: "0.0.0.0:9000", ip: "10.244.1.7", want: "http://10.244.1.7:9000"},
	} {
		o := Options{ScanServiceAddr: tc.addr, PodIP: tc.ip}
		if got := o.ScanServiceURL(); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
