// Command fixturedb writes the offline vulnerability DB of the scanner's
// tests into <-cache-dir>/db, for tests outside this module that must not
// import Trivy (the kubelet tier seeds it on its nodes, as an air-gapped
// cluster would). Its one advisory: musl before 1.2.5-r0 on Alpine 3.22 is
// CRITICALLY vulnerable (CVE-2099-0001, made up).
package main

import (
	"flag"
	"fmt"
	"os"

	dbtypes "github.com/aquasecurity/trivy-db/pkg/types"

	"github.com/eraser-oss/eraser/scanner/trivy/internal/fixture"
)

func main() {
	dir := flag.String("cache-dir", "", "the scanner's cacheDir to write the DB into")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "fixturedb: -cache-dir is required")
		os.Exit(2)
	}
	err := fixture.WriteDB(*dir, []fixture.Advisory{
		{Release: "3.22", Package: "musl", ID: "CVE-2099-0001", Fixed: "1.2.5-r0", Severity: dbtypes.SeverityCritical},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixturedb:", err)
		os.Exit(1)
	}
}
