package imagejob

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/scandb"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// ScanDBs is the leader's copy of the vulnerability DB (scandb.Mirror).
type ScanDBs interface {
	Get(repository string) scandb.State
	// Archive is the copy of one archive, fetched by digest when missing.
	Archive(repository, digest string) scandb.State
}

// errWaitingForDB: the DB's first fetch is running; the run's first wave
// waits for it, bounded by dbDownloadTimeout.
var errWaitingForDB = errors.New("waiting for the vulnerability DB")

// runDB is the vulnerability DB of a run: one archive for all its waves,
// fetched once for the cluster, or why the run has none.
type runDB struct {
	db          *scanshare.DB
	unavailable string
	// none: the run's scanners get no DB from the manager.
	none bool
	// since is when the run started waiting for the first fetch.
	since time.Time
}

// dbRepository is the repository a scanning run's DB comes from, and how
// long its first wave may wait for the fetch: the Trivy scanner's dbRepo
// and dbDownloadTimeout. ok is false when the run's scanners get no DB from
// the manager: no scanner, a custom one, or a DB seeded on the nodes
// (skipDBUpdate).
func dbRepository(data *jobdata.Data) (repo string, wait time.Duration, ok bool) {
	comps := data.Config.Components
	if data.Kind != podspec.KindCollector || !comps.Scanner.Enabled || !config.IsTrivyScanner(comps.Scanner) {
		return "", 0, false
	}
	cfg := comps.Scanner.Trivy
	if cfg == nil || cfg.SkipDBUpdate {
		return "", 0, false
	}
	return cfg.DBRepo, cfg.DBDownloadTimeout.Duration, true
}

// scanDB settles the run's DB before its first wave: the mirror's copy, or,
// once the fetch failed or outlasted dbDownloadTimeout, why there is none,
// in an Event and in every scanner's pod (each then judges nothing, so
// removes nothing on the scanner's account, and its node's failure says
// why). It returns errWaitingForDB while the first fetch runs.
func (r *Reconciler) scanDB(job *eraserv1.ImageJob, data *jobdata.Data, st *jobState) error {
	if st.db.db != nil || st.db.unavailable != "" || st.db.none {
		return nil
	}
	repo, wait, ok := dbRepository(data)
	if !ok || r.opts.ScanDBs == nil || r.opts.ScanService == "" {
		// Settled once: the job's data is immutable.
		st.db.none = true
		return nil
	}
	var s scandb.State
	pinned, err := r.pinnedDB(job)
	if err != nil {
		return err
	}
	if pinned != nil {
		s = r.opts.ScanDBs.Archive(pinned.repo, pinned.digest)
		repo = pinned.repo
	} else {
		s = r.opts.ScanDBs.Get(repo)
	}
	if s.DB != nil {
		st.db.db = s.DB
		msg := fmt.Sprintf("archive %s (%d bytes) from %s, fetched %s", s.DB.Digest, s.DB.Size, s.DB.Repo, s.DB.Fetched.UTC().Format(time.RFC3339))
		if s.DB.Schema > 0 {
			msg += fmt.Sprintf("; schema %d, built %s", s.DB.Schema, s.DB.Built.UTC().Format(time.RFC3339))
		}
		setDBCondition(job, metav1.ConditionTrue, eraserv1.ReasonDBFetched, msg)
		return nil
	}
	now := r.clock.Now()
	if st.db.since.IsZero() {
		st.db.since = now
	}
	var why, reason string
	switch {
	case s.Fetching && now.Sub(st.db.since) < wait:
		return fmt.Errorf("%w from %s", errWaitingForDB, repo)
	case s.Fetching:
		reason, why = eraserv1.ReasonDBFetchTimedOut, fmt.Sprintf("no vulnerability DB from %s within dbDownloadTimeout %v", repo, wait)
	case s.RateLimited:
		reason, why = eraserv1.ReasonDBRateLimited, fmt.Sprintf("the vulnerability DB's repository %s refused the download for its rate limit (retried with backoff for the next runs): %v", repo, s.Err)
	case s.Err != nil:
		reason, why = eraserv1.ReasonDBFetchFailed, fmt.Sprintf("fetching the vulnerability DB from %s failed (retried with backoff for the next runs): %v", repo, s.Err)
	default:
		reason, why = eraserv1.ReasonDBFetchFailed, "no vulnerability DB from "+repo
	}
	st.db.unavailable = why
	setDBCondition(job, metav1.ConditionFalse, reason, why+"; this run's scanners judge no image")
	r.recorder.Event(job, corev1.EventTypeWarning, eraserv1.ReasonVulnerabilityDBUnavailable, why+"; this run's scanners judge no image, so remove none")
	return nil
}

type archiveRef struct{ repo, digest string }

// pinnedDB is the DB the run's pods already name, when a previous leader
// (or this one before a restart) made some: the run keeps that archive to
// its end, though the repository has moved on since, so that all its
// verdicts share one DB. Nil when no pod of the run names one.
func (r *Reconciler) pinnedDB(job *eraserv1.ImageJob) (*archiveRef, error) {
	pods, err := r.cached.JobPods(job.Name)
	if err != nil {
		return nil, fmt.Errorf("reading the run's pods: %w", err)
	}
	for _, pod := range pods {
		if !jobdata.SameRun(pod, job.UID) {
			continue
		}
		if repo, digest, ok := scanshare.ParseDBAnnotation(pod.Annotations[scanshare.AnnotationDB]); ok {
			return &archiveRef{repo: repo, digest: digest}, nil
		}
	}
	return nil, nil
}

// setDBCondition records the run's DB on the job; it is written with the
// status of the pass that creates the first wave's pods.
func setDBCondition(job *eraserv1.ImageJob, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&job.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionVulnerabilityDB, Status: status, Reason: reason, Message: message, ObservedGeneration: job.Generation,
	})
}
