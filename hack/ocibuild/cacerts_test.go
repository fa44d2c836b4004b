package main

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestFindCABundle(t *testing.T) {
	const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), Mode: 0o644} }
	cases := map[string]struct {
		files map[string]*fstest.MapFile
		want  string // "" for none found
	}{
		"Debian and Ubuntu": {
			files: map[string]*fstest.MapFile{"etc/ssl/certs/ca-certificates.crt": file(pem)},
			want:  "/etc/ssl/certs/ca-certificates.crt",
		},
		"Fedora and RHEL 6": {
			files: map[string]*fstest.MapFile{"etc/pki/tls/certs/ca-bundle.crt": file(pem)},
			want:  "/etc/pki/tls/certs/ca-bundle.crt",
		},
		"RHEL 7 and later, extracted bundle only": {
			files: map[string]*fstest.MapFile{"etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem": file(pem)},
			want:  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
		},
		"openSUSE": {
			files: map[string]*fstest.MapFile{"etc/ssl/ca-bundle.pem": file(pem)},
			want:  "/etc/ssl/ca-bundle.pem",
		},
		"macOS": {
			files: map[string]*fstest.MapFile{"etc/ssl/cert.pem": file(pem)},
			want:  "/etc/ssl/cert.pem",
		},
		"Alpine, both names: the first wins": {
			files: map[string]*fstest.MapFile{"etc/ssl/certs/ca-certificates.crt": file(pem), "etc/ssl/cert.pem": file(pem)},
			want:  "/etc/ssl/certs/ca-certificates.crt",
		},
		"an empty file is passed over": {
			files: map[string]*fstest.MapFile{"etc/ssl/certs/ca-certificates.crt": file(""), "etc/pki/tls/certs/ca-bundle.crt": file(pem)},
			want:  "/etc/pki/tls/certs/ca-bundle.crt",
		},
		"a directory is passed over": {
			files: map[string]*fstest.MapFile{"etc/ssl/cert.pem/x": file(pem)},
		},
		"none": {
			files: map[string]*fstest.MapFile{"etc/hostname": file("build")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := findCABundle(fstest.MapFS(tc.files))
			if (err != nil) != (tc.want == "") {
				t.Fatalf("findCABundle: %q, %v; want %q", got, err, tc.want)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
