package scandb

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/eraser-oss/eraser/internal/testing/testregistry"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// The environment of TestPrivateCA's child: the registry's name and the
// address it listens on, and whether the download must succeed.
const (
	envCARepo = "ERASER_TEST_SCANDB_CA_REPO"
	envCAAddr = "ERASER_TEST_SCANDB_CA_ADDR"
	envCAWant = "ERASER_TEST_SCANDB_CA_WANT"
)

// TestPrivateCA: a dbRepo served over TLS by a private CA downloads when
// SSL_CERT_DIR names a directory holding the CA as a ConfigMap volume lays
// it out (the chart's deploy.scanDB.caBundle), with the public roots still
// trusted, and fails without it. Go reads the system roots once per
// process, so each case runs in a process of its own.
func TestPrivateCA(t *testing.T) {
	if repo := os.Getenv(envCARepo); repo != "" {
		privateCAChild(t, repo, os.Getenv(envCAAddr), os.Getenv(envCAWant) == "ok")
		return
	}
	srv := httptest.NewUnstartedServer(testregistry.Handler())
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	// Under a name, not an IP: a loopback IP would be spoken to in plain
	// HTTP. httptest's certificate names example.com.
	repo := "example.com:" + port + "/aquasecurity/trivy-db"
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = dialTo(addr)
	ref, err := name.ParseReference(repo + ":" + scanshare.DBSchemaTag)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: static.NewLayer([]byte("db behind a private CA"), types.MediaType(MediaType))})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(tr)); err != nil {
		t.Fatal(err)
	}

	// A ConfigMap volume: the key a symlink into ..data, which links to
	// the timestamped directory holding the file.
	caDir := t.TempDir()
	stamp := filepath.Join(caDir, "..2026_01_01_00_00_00.000000000")
	if err := os.Mkdir(stamp, 0o755); err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(stamp, "ca.crt"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(stamp), filepath.Join(caDir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/ca.crt", filepath.Join(caDir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		certDir string
		want    string
	}{
		"the CA mounted": {certDir: caDir, want: "ok"},
		"no CA":          {certDir: t.TempDir(), want: "fail"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPrivateCA$", "-test.count=1")
			var env []string
			for _, e := range os.Environ() {
				if !strings.HasPrefix(e, "SSL_CERT_FILE=") && !strings.HasPrefix(e, "SSL_CERT_DIR=") {
					env = append(env, e)
				}
			}
			cmd.Env = append(env, "SSL_CERT_DIR="+tc.certDir, envCARepo+"="+repo, envCAAddr+"="+addr, envCAWant+"="+tc.want)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("SSL_CERT_DIR=%s: %v\n%s", tc.certDir, err, out)
			}
		})
	}
}

// privateCAChild downloads the DB from repo through the manager's own
// transport (dialling addr for the registry's name) and checks the outcome.
func privateCAChild(t *testing.T, repo, addr string, wantOK bool) {
	tr := Transport(nil).(*http.Transport)
	tr.DialContext = dialTo(addr)
	m := New(Options{Dir: t.TempDir(), Refresh: time.Hour, MaxAge: time.Hour, Backoff: time.Minute, MaxBackoff: time.Minute,
		Timeout: time.Minute, Transport: tr})
	m.Get(repo)
	st := settle(t, m, repo)
	switch {
	case wantOK && st.DB == nil:
		t.Fatalf("with the private CA in SSL_CERT_DIR: no DB: %v", st.Err)
	case !wantOK && st.DB != nil:
		t.Fatal("without the private CA: the download succeeded")
	case !wantOK && (st.Err == nil || !strings.Contains(st.Err.Error(), "certificate")):
		t.Fatalf("without the private CA: %v, want a certificate error", st.Err)
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil && wantOK {
		// The public roots are still read besides the private CA.
		pool, err := x509.SystemCertPool()
		if err != nil {
			t.Fatal(err)
		}
		//nolint:staticcheck // Subjects lists a Linux system pool's roots, which is what is counted.
		if n := len(pool.Subjects()); n < 2 {
			t.Errorf("system roots with SSL_CERT_DIR: %d certificates, want the image's bundle and the private CA", n)
		}
	}
}

// dialTo dials addr whatever address is asked for.
func dialTo(addr string) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}
