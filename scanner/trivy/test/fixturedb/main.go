// Command fixturedb gives tests outside this module, which must not import
// Trivy, the offline vulnerability DB of the scanner's tests. Its one
// advisory: musl before 1.2.5-r0 on Alpine 3.22 is CRITICALLY vulnerable
// (CVE-2099-0001, made up).
//
//	fixturedb -cache-dir DIR   # writes it into DIR/db, as a scanner's cacheDir holds it (an air-gapped node)
//	fixturedb -serve ADDR      # serves it from a registry on ADDR as Trivy's artifact, until killed
//
// Serving, it prints "repository <host:port>/aquasecurity/trivy-db" and
// "refused <host:port>/refused/trivy-db" (a repository that always answers
// 429) on stdout, then "ready"; GET /fixture/archives on the same address
// says how many times the archive was downloaded.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	dbtypes "github.com/aquasecurity/trivy-db/pkg/types"

	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

var advisories = []fixture.Advisory{
	{Release: "3.22", Package: "musl", ID: "CVE-2099-0001", Fixed: "1.2.5-r0", Severity: dbtypes.SeverityCritical},
}

func main() {
	dir := flag.String("cache-dir", "", "the scanner's cacheDir to write the DB into")
	addr := flag.String("serve", "", "the address to serve the DB's registry on")
	flag.Parse()
	var err error
	switch {
	case *dir != "" && *addr == "":
		err = fixture.WriteDB(*dir, advisories)
	case *addr != "" && *dir == "":
		err = serve(*addr)
	default:
		fmt.Fprintln(os.Stderr, "fixturedb: one of -cache-dir and -serve is required")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixturedb:", err)
		os.Exit(1)
	}
}

func serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	reg, err := fixture.ServeDBOn(ln, advisories)
	if err != nil {
		return err
	}
	defer reg.Close()
	fmt.Printf("repository %s\nrefused %s\nready\n", reg.Repo, reg.RefusedRepo)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	return nil
}
