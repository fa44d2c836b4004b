// Package scanshare is what a run's scanners and the manager's scan service
// say to each other, so that each image is scanned once per cluster: a
// scanner claims the verdicts of its node's images, scans only those the
// service hands it, and shares the verdicts it makes.
//
// A shared verdict is keyed by everything that decides it (the image's
// content, the node's platform, the vulnerability DB and the scan policy),
// so a verdict is only ever reused where the node would have reached the
// same one itself.
package scanshare

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Audience is the audience of the ServiceAccount token a scanner presents
// for the run whose job UID follows the slash: a token of one run is
// refused for every other.
const Audience = "scan.eraser.sh/"

// AnnotationService is the worker pod's annotation naming the scan
// service's address, which the leader serving the service keeps current.
const AnnotationService = "eraser.sh/scan-service"

// AnnotationDB is the worker pod's annotation naming the run's DB archive,
// as DBAnnotation writes it: a new leader keeps the run on that archive,
// fetching it by digest if it must, though the repository moved on.
const AnnotationDB = "eraser.sh/scan-db"

// DBAnnotation is AnnotationDB's value for the archive with digest from
// repository: "repository@digest".
func DBAnnotation(repository, digest string) string { return repository + "@" + digest }

// ParseDBAnnotation reads AnnotationDB's value.
func ParseDBAnnotation(v string) (repository, digest string, ok bool) {
	i := strings.LastIndex(v, "@")
	if i <= 0 || ValidateDigest(v[i+1:]) != nil {
		return "", "", false
	}
	return v[:i], v[i+1:], true
}

// AudienceOf is the token audience of the run with this job UID.
func AudienceOf(jobUID string) string { return Audience + jobUID }

// The scanner container's environment, set by the manager's pod spec when
// the run shares verdicts: the service's address, the run's job UID, and
// the file of the projected token. Environment, not flags, so that a
// scanner that does not share (a custom one) ignores them.
const (
	EnvService = "ERASER_SCAN_SERVICE"
	EnvJobUID  = "ERASER_JOB_UID"
	EnvToken   = "ERASER_SCAN_TOKEN"
	// EnvServiceFile is a file holding the service's address as it is now:
	// the kubelet projects it from the pod's AnnotationService, which a
	// new leader (in a new pod, at a new address) rewrites. It overrides
	// EnvService, the address when the pod was made.
	EnvServiceFile = "ERASER_SCAN_SERVICE_FILE"
	// EnvDB is the digest of the run's DB archive, which the scanner
	// downloads from the service (DBPath) and checks; EnvDBUnavailable
	// says instead why the run has no DB, and the scanner then judges
	// nothing.
	EnvDB            = "ERASER_SCAN_DB"
	EnvDBUnavailable = "ERASER_SCAN_DB_UNAVAILABLE"
	// EnvDBSize is the archive's size in bytes (DB.Size): the scanner
	// reads no more than that from the service, whatever it sends.
	EnvDBSize = "ERASER_SCAN_DB_SIZE"
	// EnvDBSchema and EnvDBBuilt (RFC 3339) are what the run's archive
	// says of itself, which a scanner reports even when it never opens
	// the DB (every verdict it needs came from other nodes).
	EnvDBSchema = "ERASER_SCAN_DB_SCHEMA"
	EnvDBBuilt  = "ERASER_SCAN_DB_BUILT"
)

// TokenTTL is the projected token's lifetime: the kubelet renews it at 80%,
// and the service reviews each token once per Remember.
const TokenTTL = 3600

// Paths of the service; the run's job UID is the path's last element.
const (
	ClaimPath = "/scan/v1/claim/"
	SharePath = "/scan/v1/share/"
	DBPath    = "/scan/v1/db/"
)

// Bounds on one request, so that no scanner can make the service hold an
// unbounded body. A node with more images than MaxKeys asks in batches.
const (
	MaxKeys = 1000
	// MaxBody bounds a request body, and an answer: MaxKeys keys or
	// verdicts with their findings (workerresult.MaxFindings each) fit in
	// a request; the service answers no more verdicts at once than fit.
	MaxBody = 4 << 20
)

// Key names a verdict by what decides it.
type Key struct {
	// Digest is the image's content: its config digest, which is the
	// image ID both containerd and CRI-O give it.
	Digest string `json:"digest"`
	// Platform is the node's os/arch: a verdict on one platform's content
	// is never handed to a node of another.
	Platform string `json:"platform"`
	// DB is the digest of the vulnerability DB the scan used.
	DB string `json:"db"`
	// Policy is the scan policy's fingerprint (internal/node/scan).
	Policy string `json:"policy"`
}

func (k Key) String() string {
	return k.Digest + " " + k.Platform + " db=" + k.DB + " policy=" + k.Policy
}

// Validate refuses a key that could not name a verdict: a scanner's bug
// or a forged request, never to be stored.
func (k Key) Validate() error {
	if err := ValidateDigest(k.Digest); err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	if err := ValidateDigest(k.DB); err != nil {
		return fmt.Errorf("db: %w", err)
	}
	if !validHex(k.Policy, 64) {
		return errors.New("policy: not a sha256 fingerprint")
	}
	os, arch, ok := strings.Cut(k.Platform, "/")
	if !ok || !word(os) || !word(arch) || len(k.Platform) > 64 {
		return fmt.Errorf("platform %q: not os/arch", k.Platform)
	}
	return nil
}

// ValidateDigest accepts sha256:<64 lowercase hex>.
func ValidateDigest(d string) error {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if !ok || !validHex(hexPart, 64) {
		return fmt.Errorf("%q is not a sha256 digest", d)
	}
	return nil
}

// Digest turns a runtime's image ID into a key's digest: containerd gives
// sha256:<hex>, CRI-O the bare hex. Anything else has no digest to share
// by ("", false), and is scanned on the node.
func Digest(imageID string) (string, bool) {
	if validHex(imageID, 64) {
		imageID = "sha256:" + imageID
	}
	if ValidateDigest(imageID) != nil {
		return "", false
	}
	return imageID, true
}

func validHex(s string, n int) bool {
	if len(s) != n || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func word(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// Shareable says whether a verdict is a fact about the image that another
// node may reuse. A failed scan or one the timeout cut short says
// something about this node's run, not about the image.
func Shareable(verdict string) bool {
	switch verdict {
	case "vulnerable", "end-of-life", "clean", "unsupported":
		return true
	}
	return false
}

// maxField bounds each text of a shared finding: CVE and GHSA IDs,
// package names and versions are far shorter.
const maxField = 256

// ValidateScan refuses a verdict larger than a scanner makes: more
// findings than it keeps (workerresult.MaxFindings), or texts too long to
// be IDs, packages or versions; and a vulnerable verdict that lists no
// finding, which no scan makes and which would remove an image on no
// evidence.
func ValidateScan(s workerresult.Scan) error {
	if s.Verdict == "vulnerable" && len(s.Findings) == 0 {
		return errors.New("a vulnerable verdict lists no finding")
	}
	if len(s.Findings) > workerresult.MaxFindings {
		return fmt.Errorf("%d findings: a verdict carries at most %d", len(s.Findings), workerresult.MaxFindings)
	}
	if s.MoreFindings < 0 {
		return errors.New("moreFindings is negative")
	}
	for _, f := range s.Findings {
		if len(f.ID) > maxField || len(f.Severity) > maxField || len(f.Package) > maxField || len(f.FixedVersion) > maxField {
			return fmt.Errorf("finding %.40q: a text longer than %d bytes", f.ID, maxField)
		}
	}
	return nil
}

// Verdict is a shared verdict and where it was made.
type Verdict struct {
	Key  Key               `json:"key"`
	Scan workerresult.Scan `json:"scan"`
	// Node and Pod made it: the service takes them from the scanner's
	// authenticated identity, never from the request.
	Node string    `json:"node"`
	Pod  string    `json:"pod"`
	At   time.Time `json:"at"`
	// ConfirmedBy is the node whose own scan reached the same verdict: a
	// verdict that removes reaches a third node only with one.
	ConfirmedBy string `json:"confirmedBy,omitempty"`
}

// ClaimRequest asks for the verdicts of a node's images. With Wait, when
// the answer would only say wait, the service holds it up to Wait seconds
// (at most MaxClaimWait) for a verdict or a claim to come free, rather than
// have the scanner ask again after RetryAfter.
type ClaimRequest struct {
	Keys []Key `json:"keys"`
	Wait int   `json:"wait,omitempty"`
}

// MaxClaimWait bounds a claim's Wait, in seconds: well within the scanner's
// request timeout.
const MaxClaimWait = 20

// ClaimResponse says, for each key asked: its verdict (Verdicts); that
// this scanner is to scan it now and share the verdict (Scan); or that
// another scanner is scanning it and the scanner should ask again after
// RetryAfter (Wait). A key in none of them is the scanner's to scan.
type ClaimResponse struct {
	Verdicts []Verdict `json:"verdicts,omitempty"`
	Scan     []Key     `json:"scan,omitempty"`
	Wait     []Key     `json:"wait,omitempty"`
	// RetryAfter is in seconds.
	RetryAfter int `json:"retryAfter,omitempty"`
}

// ShareRequest carries the verdicts a scanner made, and the keys it
// claimed but has no verdict to share for (its scan failed or ran out of
// time), so that another scanner may take them at once.
type ShareRequest struct {
	Verdicts []Shared `json:"verdicts,omitempty"`
	Released []Key    `json:"released,omitempty"`
}

// Shared is one verdict as a scanner sends it.
type Shared struct {
	Key  Key               `json:"key"`
	Scan workerresult.Scan `json:"scan"`
}

// ShareResponse counts what the service kept, and says why it refused the
// rest.
type ShareResponse struct {
	Stored  int       `json:"stored"`
	Refused []Refused `json:"refused,omitempty"`
}

// Refused is a verdict the service did not keep.
type Refused struct {
	Key    Key    `json:"key"`
	Reason string `json:"reason"`
}

// DB names a run's vulnerability DB: the digest and size of the archive
// the manager fetched (Trivy's DB layer, a gzipped tar of trivy.db and
// metadata.json), the repository it came from and when.
type DB struct {
	Digest  string    `json:"digest"`
	Size    int64     `json:"size"`
	Repo    string    `json:"repo"`
	Fetched time.Time `json:"fetched"`
	// Schema and Built are what the archive's metadata.json says: the
	// DB's schema version and when it was built (zero when it says none).
	Schema int       `json:"schema,omitempty"`
	Built  time.Time `json:"built,omitzero"`
}

// DBSchemaTag is the tag of the DB schema the Trivy scanner reads, added
// to a dbRepo given without one (as upstream's is).
const DBSchemaTag = "2"

// DBReference is dbRepo with the schema's tag when it has none: the
// reference the manager's copy and a scanner fetching its own DB both ask
// for.
func DBReference(repo string) (name.Reference, error) {
	ref := repo
	if last := ref[strings.LastIndex(ref, "/")+1:]; !strings.ContainsAny(last, ":@") {
		ref += ":" + DBSchemaTag
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("dbRepo %q is not an image repository: %w", repo, err)
	}
	return r, nil
}
