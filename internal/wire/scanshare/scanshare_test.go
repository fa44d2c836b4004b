package scanshare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestKeyValidate(t *testing.T) {
	good := Key{Digest: "sha256:" + strings.Repeat("a", 64), Platform: "linux/amd64", DB: "sha256:" + strings.Repeat("b", 64), Policy: strings.Repeat("c", 64)}
	for name, tc := range map[string]struct {
		edit    func(*Key)
		wantErr string
	}{
		"valid":                   {edit: func(*Key) {}},
		"uppercase digest":        {edit: func(k *Key) { k.Digest = "sha256:" + strings.Repeat("A", 64) }, wantErr: "digest:"},
		"a tag, not a digest":     {edit: func(k *Key) { k.Digest = "docker.io/library/alpine:3.19" }, wantErr: "digest:"},
		"short db digest":         {edit: func(k *Key) { k.DB = "sha256:abc" }, wantErr: "db:"},
		"policy not a sha256":     {edit: func(k *Key) { k.Policy = "strict" }, wantErr: "policy:"},
		"platform without arch":   {edit: func(k *Key) { k.Platform = "linux" }, wantErr: "platform"},
		"platform with a space":   {edit: func(k *Key) { k.Platform = "linux/amd 64" }, wantErr: "platform"},
		"platform with a variant": {edit: func(k *Key) { k.Platform = "linux/arm/v7" }, wantErr: "platform"},
	} {
		t.Run(name, func(t *testing.T) {
			k := good
			tc.edit(&k)
			err := k.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tc.wantErr)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	hex := strings.Repeat("0f", 32)
	for id, want := range map[string]string{
		"sha256:" + hex:       "sha256:" + hex, // containerd
		hex:                   "sha256:" + hex, // CRI-O
		"sha512:" + hex + hex: "",
		"alpine:3.19":         "",
		"":                    "",
	} {
		got, ok := Digest(id)
		if got != want || ok != (want != "") {
			t.Errorf("Digest(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
}

func TestParseDBAnnotation(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	type parsed struct {
		Repo, Digest string
		OK           bool
	}
	for name, tc := range map[string]struct {
		value string
		want  parsed
	}{
		"written by DBAnnotation": {value: DBAnnotation("ghcr.io/aquasecurity/trivy-db:2", digest), want: parsed{"ghcr.io/aquasecurity/trivy-db:2", digest, true}},
		"registry with a port":    {value: DBAnnotation("10.96.0.1:5000/trivy-db:2", digest), want: parsed{"10.96.0.1:5000/trivy-db:2", digest, true}},
		"no repository":           {value: "@" + digest},
		"no digest":               {value: "ghcr.io/aquasecurity/trivy-db:2"},
		"not a sha256 digest":     {value: "ghcr.io/aquasecurity/trivy-db:2@md5:abc"},
		"empty":                   {},
	} {
		repo, d, ok := ParseDBAnnotation(tc.value)
		if diff := cmp.Diff(tc.want, parsed{repo, d, ok}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestValidateScan(t *testing.T) {
	finding := workerresult.Finding{ID: "CVE-2099-0001", Severity: "CRITICAL", Package: "musl", FixedVersion: "1.2.5-r0"}
	many := make([]workerresult.Finding, workerresult.MaxFindings+1)
	for i := range many {
		many[i] = finding
	}
	for name, tc := range map[string]struct {
		scan    workerresult.Scan
		wantErr string
	}{
		"vulnerable with its finding":       {scan: workerresult.Scan{Verdict: "vulnerable", Findings: []workerresult.Finding{finding}}},
		"vulnerable with more than listed":  {scan: workerresult.Scan{Verdict: "vulnerable", Findings: []workerresult.Finding{finding}, MoreFindings: 40}},
		"clean":                             {scan: workerresult.Scan{Verdict: "clean"}},
		"end of life":                       {scan: workerresult.Scan{Verdict: "end-of-life", EndOfLife: true}},
		"unsupported":                       {scan: workerresult.Scan{Verdict: "unsupported"}},
		"vulnerable without findings":       {scan: workerresult.Scan{Verdict: "vulnerable"}, wantErr: "a vulnerable verdict lists no finding"},
		"vulnerable counting unlisted only": {scan: workerresult.Scan{Verdict: "vulnerable", MoreFindings: 3}, wantErr: "a vulnerable verdict lists no finding"},
		"too many findings":                 {scan: workerresult.Scan{Verdict: "vulnerable", Findings: many}, wantErr: "6 findings"},
		"negative count":                    {scan: workerresult.Scan{Verdict: "vulnerable", Findings: []workerresult.Finding{finding}, MoreFindings: -1}, wantErr: "moreFindings is negative"},
		"a text too long":                   {scan: workerresult.Scan{Verdict: "vulnerable", Findings: []workerresult.Finding{{ID: strings.Repeat("x", maxField+1)}}}, wantErr: "finding"},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidateScan(tc.scan)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tc.wantErr)
			}
		})
	}
}
