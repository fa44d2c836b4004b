package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// caBundlePaths are where build hosts keep the system's CA bundle as one
// PEM file, most common first: Debian, Ubuntu, Alpine, Arch and Gentoo;
// Fedora and RHEL (both of their paths); openSUSE; macOS and Alpine's
// other name for it.
var caBundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// macOSKeychains are the keychains a macOS build host exports its roots
// from when none of caBundlePaths is a readable bundle.
var macOSKeychains = []string{
	"/System/Library/Keychains/SystemRootCertificates.keychain",
	"/Library/Keychains/System.keychain",
}

// caBundleNone asks for Linux images without a CA bundle.
const caBundleNone = "none"

// findCABundle picks the CA bundle of the build host: the first path of
// caBundlePaths that fsys (rooted at "/") holds as a non-empty regular
// file holding a PEM certificate. It returns the path, or an error that
// lists where it looked.
func findCABundle(fsys fs.FS) (string, error) {
	for _, p := range caBundlePaths {
		data, err := fs.ReadFile(fsys, strings.TrimPrefix(p, "/"))
		if err != nil {
			continue
		}
		if strings.Contains(string(data), "-----BEGIN CERTIFICATE-----") {
			return p, nil
		}
	}
	return "", fmt.Errorf("no CA bundle in any of %s: install the system's CA certificates (Debian: apt-get install ca-certificates; Fedora/RHEL: dnf install ca-certificates), or give one with CA_CERTS=<file> (make) / -ca-certs (CA_CERTS=none for images without one)",
		strings.Join(caBundlePaths, ", "))
}

// readCABundle returns the bundle the Linux images carry: the file
// flagged (caBundleNone: none), else the build host's.
func readCABundle(flagged string) ([]byte, error) {
	switch flagged {
	case caBundleNone:
		return nil, nil
	case "":
	default:
		data, err := os.ReadFile(flagged)
		if err != nil {
			return nil, fmt.Errorf("reading the CA bundle for the Linux images: %w", err)
		}
		return data, nil
	}
	p, err := findCABundle(os.DirFS("/"))
	if err == nil {
		return os.ReadFile(p)
	}
	if runtime.GOOS == "darwin" {
		if data, kerr := exportKeychains(); kerr == nil {
			return data, nil
		} else {
			err = errors.Join(err, kerr)
		}
	}
	return nil, err
}

// exportKeychains exports the certificates of macOS's system keychains as
// PEM, as security(1) does.
func exportKeychains() ([]byte, error) {
	args := append([]string{"find-certificate", "-a", "-p"}, macOSKeychains...)
	out, err := exec.Command("security", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("exporting the system keychains' certificates (security %s): %w", strings.Join(args, " "), err)
	}
	if !strings.Contains(string(out), "-----BEGIN CERTIFICATE-----") {
		return nil, errors.New("the system keychains hold no certificate")
	}
	return out, nil
}
