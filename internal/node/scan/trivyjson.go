package scan

import (
	"encoding/json"
	"fmt"
)

// trivyReport is the part of Trivy's JSON report (--format json) the
// scanner reads.
type trivyReport struct {
	Metadata struct {
		OS *struct {
			Family string `json:"Family"`
			Name   string `json:"Name"`
			EOSL   bool   `json:"EOSL"`
		} `json:"OS"`
	} `json:"Metadata"`
	Results []struct {
		Target          string `json:"Target"`
		Class           string `json:"Class"` // os-pkgs, lang-pkgs
		Vulnerabilities []struct {
			VulnerabilityID  string `json:"VulnerabilityID"`
			PkgName          string `json:"PkgName"`
			InstalledVersion string `json:"InstalledVersion"`
			FixedVersion     string `json:"FixedVersion"`
			Status           string `json:"Status"`
			Severity         string `json:"Severity"`
		} `json:"Vulnerabilities"`
	} `json:"Results"`
}

// ParseTrivyJSON turns a Trivy JSON report into a Report. Operating-system
// packages are type "os", language packages "library", as Trivy's
// --pkg-types names them.
func ParseTrivyJSON(data []byte) (Report, error) {
	var tr trivyReport
	if err := json.Unmarshal(data, &tr); err != nil {
		return Report{}, fmt.Errorf("reading Trivy's report: %w", err)
	}
	var r Report
	if tr.Metadata.OS != nil {
		r.EndOfLife = tr.Metadata.OS.EOSL
	}
	for _, res := range tr.Results {
		typ := "library"
		if res.Class == "os-pkgs" {
			typ = "os"
		}
		for _, v := range res.Vulnerabilities {
			r.Findings = append(r.Findings, Finding{
				ID: v.VulnerabilityID, Package: v.PkgName, Severity: v.Severity,
				FixedVersion: v.FixedVersion, Status: v.Status, Type: typ,
			})
		}
	}
	return r, nil
}
