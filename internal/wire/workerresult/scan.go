package workerresult

import "time"

// Scan is a scanner's verdict on one image and what decided it: the
// findings that matched the policy, or end of life; or why there is no
// verdict (unsupported, failed, not scanned). A scanner logs one on each of
// its result lines; the per-node report keeps it beside the image.
type Scan struct {
	// Verdict is vulnerable, end-of-life, clean, unsupported, failed or
	// not scanned (internal/node/scan).
	Verdict string `json:"verdict"`
	// Remove says the image was handed to the remover.
	Remove bool `json:"remove,omitempty"`
	// Findings are the first MaxFindings vulnerabilities that matched the
	// policy; MoreFindings counts the rest.
	Findings     []Finding `json:"findings,omitempty"`
	MoreFindings int       `json:"moreFindings,omitempty"`
	// EndOfLife: the image's OS is no longer supported by its vendor.
	EndOfLife bool `json:"endOfLife,omitempty"`
	// From is the node and pod whose scan made the verdict, when another
	// node of the cluster scanned the image; absent when this node did.
	From *Origin `json:"from,omitempty"`
}

// Origin is the scanner pod that made a shared verdict, and the node whose
// own scan confirmed it (a verdict that removes reaches other nodes only
// confirmed).
type Origin struct {
	Node        string `json:"node"`
	Pod         string `json:"pod"`
	ConfirmedBy string `json:"confirmedBy,omitempty"`
}

// MaxFindings bounds the findings a verdict carries: enough to say why,
// few enough that a node of thousands of images keeps a bounded report.
const MaxFindings = 5

// Finding is one vulnerability that counted against an image.
type Finding struct {
	ID           string `json:"id"`
	Severity     string `json:"severity,omitempty"`
	Package      string `json:"package,omitempty"`
	FixedVersion string `json:"fixedVersion,omitempty"`
}

// ScanDB says which vulnerability DB a scanner judged with.
type ScanDB struct {
	// Version is the DB's schema version.
	Version int `json:"version,omitempty"`
	// UpdatedAt is when the DB was built; DownloadedAt when this node got it.
	UpdatedAt    *time.Time `json:"updatedAt,omitempty"`
	DownloadedAt *time.Time `json:"downloadedAt,omitempty"`
	// NextUpdate is when the DB's publisher expects a newer one.
	NextUpdate *time.Time `json:"nextUpdate,omitempty"`
	// Archive is the digest of the DB archive the manager fetched for the
	// run and handed to its scanners; absent when the node fetched its own.
	Archive string `json:"archive,omitempty"`
}

// ScanOutcome is the outcome word of a scanner's result line for a
// verdict: the verdict itself, but "scan failed" for a failed scan, so that
// it never reads as a failed removal.
func ScanOutcome(verdict string) string {
	if verdict == "failed" {
		return "scan failed"
	}
	return verdict
}
