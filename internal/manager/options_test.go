package manager

import (
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
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

func TestScanDBProxyURL(t *testing.T) {
	type result struct {
		URL string
		Err bool
	}
	cases := map[string]struct {
		flag string
		want result
	}{
		"unset: the environment's":  {},
		"http":                      {flag: "http://proxy.example:3128", want: result{URL: "http://proxy.example:3128"}},
		"with credentials":          {flag: "http://u:p@proxy.example:3128", want: result{URL: "http://u:p@proxy.example:3128"}},
		"socks5":                    {flag: "socks5://10.0.0.1:1080", want: result{URL: "socks5://10.0.0.1:1080"}},
		"no scheme":                 {flag: "proxy.example:3128", want: result{Err: true}},
		"another scheme":            {flag: "ftp://proxy.example", want: result{Err: true}},
		"no host":                   {flag: "http://", want: result{Err: true}},
		"not a URL (control bytes)": {flag: "http://proxy\x7f:1", want: result{Err: true}},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		o := Options{ScanDBProxy: tc.flag, LeaderElect: false}
		u, err := o.ScanDBProxyURL()
		r := result{Err: err != nil}
		if u != nil {
			r.URL = u.String()
		}
		if verr := o.Validate(); (verr != nil) != r.Err {
			t.Errorf("%s: Validate() = %v, ScanDBProxyURL() error %v", name, verr, err)
		}
		got[name], want[name] = r, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScanDBProxyURL (-want +got):\n%s", diff)
	}
}

func TestValidateKubeAPIBounds(t *testing.T) {
	got := map[string]bool{}
	for name, o := range map[string]Options{
		"the defaults":         {KubeAPIQPS: 100, KubeAPIBurst: 200},
		"no bound":             {KubeAPIQPS: 0, KubeAPIBurst: 0},
		"a negative rate":      {KubeAPIQPS: -1, KubeAPIBurst: 10},
		"a negative burst":     {KubeAPIQPS: 10, KubeAPIBurst: -1},
		"a rate with no burst": {KubeAPIQPS: 10},
	} {
		got[name] = o.Validate() == nil
	}
	want := map[string]bool{"the defaults": true, "no bound": true, "a negative rate": false, "a negative burst": false, "a rate with no burst": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("valid (-want +got):\n%s", diff)
	}
}

// TestBoundClients: the flags replace GetConfig's unbounded clients; a
// rate of 0 leaves them so.
func TestBoundClients(t *testing.T) {
	type bound struct {
		QPS   float32
		Burst int
	}
	got := map[string]bound{}
	for name, o := range map[string]Options{
		"the defaults": {KubeAPIQPS: 200, KubeAPIBurst: 400},
		"no bound":     {},
	} {
		cfg := &rest.Config{QPS: -1}
		o.BoundClients(cfg)
		got[name] = bound{cfg.QPS, cfg.Burst}
	}
	want := map[string]bound{"the defaults": {200, 400}, "no bound": {-1, 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("client bounds (-want +got):\n%s", diff)
	}
}

func TestReferenceIndexFlag(t *testing.T) {
	tests := map[string]struct {
		args []string
		want bool // NoReferenceIndex
	}{
		"default":  {},
		"on":       {args: []string{"--reference-index"}},
		"off":      {args: []string{"--reference-index=false"}, want: true},
		"on again": {args: []string{"--reference-index=false", "--reference-index=true"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			o.Bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, o.NoReferenceIndex); diff != "" {
				t.Errorf("NoReferenceIndex (-want +got):\n%s", diff)
			}
		})
	}
}
