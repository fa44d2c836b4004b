package scan

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTrivyJSON(t *testing.T) {
	data, err := os.ReadFile("testdata/trivy-alpine.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTrivyJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{EndOfLife: true, Findings: []Finding{
		{ID: "CVE-2099-0001", Package: "musl", Severity: "CRITICAL", FixedVersion: "1.2.5-r0", Status: "fixed", Type: "os"},
		{ID: "CVE-2099-0002", Package: "zlib", Severity: "LOW", Status: "affected", Type: "os"},
		{ID: "GHSA-0000-0000-0001", Package: "lodash", Severity: "HIGH", FixedVersion: "4.17.21", Status: "fixed", Type: "library"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The policy on it: critical only, unfixed ignored, OS packages only.
	j := Policy{Severities: []string{"CRITICAL"}, IgnoreUnfixed: true, Types: []string{"os"}}.Judge(img, got, nil)
	if j.Verdict != Vulnerable || len(j.Findings) != 1 || j.Findings[0].ID != "CVE-2099-0001" {
		t.Errorf("judgement %+v", j)
	}
	if _, err := ParseTrivyJSON([]byte("Error: no DB")); err == nil {
		t.Error("a non-JSON report parsed")
	}
	clean, err := ParseTrivyJSON([]byte(`{"SchemaVersion":2,"Results":[{"Target":"x","Class":"os-pkgs"}]}`))
	if err != nil || len(clean.Findings) != 0 || clean.EndOfLife {
		t.Errorf("clean report: %+v, %v", clean, err)
	}
}
