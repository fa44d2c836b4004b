package endpoint

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in       string
		want     Address
		wantDial string
		wantErr  string
	}{
		"containerd":        {in: "unix:///run/containerd/containerd.sock", want: Address{Unix, "/run/containerd/containerd.sock"}, wantDial: "/run/containerd/containerd.sock"},
		"uncleaned path":    {in: "unix:///run//crio/./crio.sock", want: Address{Unix, "/run/crio/crio.sock"}, wantDial: "/run/crio/crio.sock"},
		"pipe":              {in: "npipe://./pipe/containerd-containerd", want: Address{NamedPipe, "containerd-containerd"}, wantDial: `\\.\pipe\containerd-containerd`},
		"pipe four slashes": {in: "npipe:////./pipe/containerd-containerd", want: Address{NamedPipe, "containerd-containerd"}, wantDial: `\\.\pipe\containerd-containerd`},
		"empty":             {in: "", wantErr: "non-empty"},
		"spaces":            {in: " unix:///x", wantErr: "without spaces"},
		"no scheme":         {in: "/run/containerd/containerd.sock", wantErr: "missing scheme"},
		"tcp":               {in: "tcp://127.0.0.1:2375", wantErr: `unsupported scheme "tcp"`},
		"relative unix":     {in: "unix://run/containerd.sock", wantErr: "absolute"},
		"unix query":        {in: "unix:///x.sock?a=b", wantErr: "absolute"},
		"remote pipe":       {in: "npipe://host/pipe/x", wantErr: "only local pipes"},
		"pipe without name": {in: "npipe://./pipe/", wantErr: "npipe://./pipe/<name>"},
		"pipe nested":       {in: "npipe://./pipe/a/b", wantErr: "npipe://./pipe/<name>"},
		"pipe wrong prefix": {in: "npipe://./tube/x", wantErr: "npipe://./pipe/<name>"},
		"not a url":         {in: "unix://%zz", wantErr: "not a URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got.DialPath() != tc.wantDial {
				t.Errorf("DialPath = %q, want %q", got.DialPath(), tc.wantDial)
			}
			again, err := Parse(got.String())
			if err != nil || again != got {
				t.Errorf("String() %q does not parse back: %v %+v", got.String(), err, again)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"unix:///run/x.sock", "npipe://./pipe/x", "npipe:////./pipe/x", "tcp://a:1", "unix://%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			return
		}
		switch a.Scheme {
		case Unix:
			if !strings.HasPrefix(a.Path, "/") {
				t.Fatalf("relative unix path %q from %q", a.Path, s)
			}
		case NamedPipe:
			if a.Path == "" || strings.ContainsAny(a.Path, `/\`) {
				t.Fatalf("bad pipe name %q from %q", a.Path, s)
			}
		default:
			t.Fatalf("scheme %q from %q", a.Scheme, s)
		}
		if b, err := Parse(a.String()); err != nil || b != a {
			t.Fatalf("%q -> %q does not round-trip: %v", s, a.String(), err)
		}
	})
}

func TestIsLoopbackHost(t *testing.T) {
	cases := map[string]bool{
		"127.0.0.1:5000": true, "127.1.2.3": true, "localhost:80": true, "LOCALHOST": true, "[::1]:5000": true, "::1": true,
		"10.0.0.1:5000": false, "ghcr.io": false, "registry.example.com:443": false, "": false,
	}
	for host, want := range cases {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
