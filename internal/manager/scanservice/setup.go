package scanservice

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/scandb"
)

// The scan service's bounds: 64 MiB of verdicts is some 200,000 images'
// (a verdict with its findings is a few hundred bytes); a claim lasts
// longer than the slowest scan of one image, so that only a dead scanner's
// claims pass to another.
const (
	scanVerdictBudget = 64 << 20
	scanClaimLease    = 10 * time.Minute
	scanClaimGrant    = 4
	scanRetryAfter    = 2 * time.Second
	scanAnnounceRetry = 5 * time.Second
)

// What the scan service's requests may cost, sized so that a real run
// never meets a bound and anything else is cheap (docs/security.md):
//
//   - A scanner's token is reviewed once, and its answer reused until the
//     token expires (an hour; the kubelet renews it at 48 minutes), the
//     pod being checked in the cache on each request. A refusal is reused
//     for 30 s.
//   - TokenReviews: 10 a second, 100 at once. A run's scanners start in
//     waves of at most maxConcurrentNodes and each needs one review, then
//     one per renewed token: 10 a second renews 28,000 scanners' tokens,
//     and a scanner told to wait (503) fetches the DB again 1 to 10 s
//     later. Only tokens whose own claims name a running scanner of the
//     run get this far, so the bound is what forged ones can cost the API
//     server, in the flow of the manager's own calls and lease renewals.
//   - One source address: 20 requests a second, 200 at once; one scanner
//     pod: 10 a second, 200 at once. A scanner claims at most a few keys
//     per request and scans them before it asks again (a request every
//     few seconds), waits in a held claim that returns only with an answer
//     for one of its own images, and downloads the DB once: only a node
//     whose images are all answered one by one, in a burst, comes near
//     the burst, and a request past it costs the node only scanning those
//     images itself.
const (
	scanTokenRemember   = time.Hour
	scanRefusalRemember = 30 * time.Second
	scanReviewRate      = 10
	scanReviewBurst     = 100
	scanPerSourceRate   = 20
	scanPerSourceBurst  = 200
	scanPerPodRate      = 10
	scanPerPodBurst     = 200
)

// The DB copy: Trivy's DB is rebuilt every 6 hours, so its repository is
// asked hourly whether a newer one exists (a manifest read); a copy serves
// for 3 days when the repository stops answering, and a failed fetch is
// retried from a minute to an hour after it.
const (
	scanDBRefresh    = time.Hour
	scanDBMaxAge     = 72 * time.Hour
	scanDBBackoff    = time.Minute
	scanDBMaxBackoff = time.Hour
	scanDBTimeout    = 10 * time.Minute
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// Options say where the leader serves the scan service and keeps its copy
// of the DB.
type Options struct {
	// Namespace holds the worker pods.
	Namespace string
	// Addr is the service's listening address, URL its address as the
	// worker pods reach it.
	Addr, URL string
	// DBDir keeps the DB copy; DBProxy, if set, is the proxy its download
	// goes through.
	DBDir   string
	DBProxy *url.URL
}

// Service is the leader's scan service and its copy of the DB.
type Service struct {
	opts     Options
	verdicts *Verdicts
	// mirror is nil when its directory is not writable: the run's
	// scanners then fetch their own DB, as without a service.
	mirror *scandb.Mirror
}

// New prepares the scan service when the worker pods can be told where it
// is (opts.URL); nil otherwise.
func New(log logr.Logger, opts Options) (*Service, error) {
	if opts.URL == "" {
		return nil, nil
	}
	s := &Service{opts: opts, verdicts: NewVerdicts(VerdictOptions{Budget: scanVerdictBudget, Lease: scanClaimLease, Grant: scanClaimGrant,
		Log: log.WithName("scan-service")})}
	collectors := Collectors(s.verdicts)
	if err := writable(opts.DBDir); err != nil {
		log.Info("the scanners fetch their own vulnerability DB: the manager cannot keep one (mount a writable volume there, as the chart does)", "dir", opts.DBDir, "error", err.Error())
	} else {
		fetches := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eraser_scan_db_fetches_total",
			Help: "Fetches of the vulnerability DB from its repository, by result: downloaded (a new DB), unchanged (only its manifest read), failed."}, []string{"result"})
		fetched := prometheus.NewCounter(prometheus.CounterOpts{Name: "eraser_scan_db_fetched_bytes_total", Help: "Bytes of vulnerability DB downloaded from its repository."})
		collectors = append(collectors, fetches, fetched)
		s.mirror = scandb.New(scandb.Options{Dir: opts.DBDir, Refresh: scanDBRefresh, MaxAge: scanDBMaxAge, Backoff: scanDBBackoff, MaxBackoff: scanDBMaxBackoff,
			Timeout: scanDBTimeout, Transport: scandb.Transport(opts.DBProxy), Fetched: func(result string, n int64) {
				fetches.WithLabelValues(result).Inc()
				fetched.Add(float64(n))
			}})
	}
	for _, c := range collectors {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("registering the scan service's metrics: %w", err)
		}
	}
	return s, nil
}

// writable checks that dir can hold the DB archives.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "probe-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// DBs is what the ImageJob controller reads of the DB copy
// (imagejob.ScanDBs).
type DBs interface {
	Get(repository string) scandb.State
	Archive(repository, digest string) scandb.State
}

// DBs is the DB copy: nil without one, so that the run's pods name no DB.
func (s *Service) DBs() DBs {
	if s == nil || s.mirror == nil {
		return nil
	}
	return s.mirror
}

// Setup adds the service to the manager, run on the leader alone.
func (s *Service) Setup(mgr ctrl.Manager) error {
	if s == nil {
		return nil
	}
	opts := s.opts
	c := mgr.GetClient()
	auth := &TokenReviewer{
		Review: func(ctx context.Context, r *authv1.TokenReview) error { return c.Create(ctx, r) },
		Pod: func(ctx context.Context, name string) (*corev1.Pod, error) {
			pod := &corev1.Pod{}
			return pod, c.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: name}, pod)
		},
		IsScanner:       runningScanner,
		Namespace:       opts.Namespace,
		ServiceAccount:  podspec.ServiceAccount,
		Remember:        scanTokenRemember,
		RememberRefusal: scanRefusalRemember,
		Reviews:         rate.NewLimiter(scanReviewRate, scanReviewBurst),
	}
	served := prometheus.NewCounter(prometheus.CounterOpts{Name: "eraser_scan_db_served_bytes_total", Help: "Bytes of vulnerability DB the scan service sent to scanners."})
	reviews := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eraser_scan_token_reviews_total",
		Help: "TokenReviews the scan service sent to the API server, by result: authenticated, refused, failed (no answer)."}, []string{"result"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eraser_scan_requests_refused_total",
		Help: "Requests the scan service refused before serving them, by reason: no-token, not-scanner, rate-limited, busy (no TokenReview allowed now), unavailable."}, []string{"reason"})
	for _, c := range []prometheus.Collector{served, reviews, refused} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("registering the scan service's metrics: %w", err)
		}
	}
	auth.Reviewed = func(result string) { reviews.WithLabelValues(result).Inc() }
	srv := &Server{Verdicts: s.verdicts, Auth: auth, RetryAfter: scanRetryAfter, Log: mgr.GetLogger().WithName("scan-service"),
		PerSource: Limit{Rate: scanPerSourceRate, Burst: scanPerSourceBurst},
		PerPod:    Limit{Rate: scanPerPodRate, Burst: scanPerPodBurst},
		Refused:   func(reason string) { refused.WithLabelValues(reason).Inc() },
		Served:    func(n int64) { served.Add(float64(n)) }}
	if s.mirror != nil {
		srv.DBs = s.mirror
	}
	// The cache answers at once: a context of its own is enough.
	s.verdicts.SetLive(func(job string) bool { return runLive(context.Background(), c, types.UID(job)) })
	if err := mgr.Add(&Runnable{Addr: opts.Addr, Server: srv}); err != nil {
		return err
	}
	a := &announcer{c: c, ns: opts.Namespace, url: opts.URL, log: mgr.GetLogger().WithName("scan-service"), retry: scanAnnounceRetry}
	if s.mirror != nil {
		a.fetch = func(repository, digest string) { s.mirror.Archive(repository, digest) }
	}
	return mgr.Add(a)
}

// runLive says whether the ImageJob with this UID exists and has not
// finished. When the cache cannot say, the run is taken as live: its
// verdicts are forgotten at the next tick instead.
func runLive(ctx context.Context, c client.Reader, job types.UID) bool {
	var jobs eraserv1.ImageJobList
	if err := c.List(ctx, &jobs); err != nil {
		return true
	}
	for _, j := range jobs.Items {
		if j.UID == job {
			return j.Status.Phase != eraserv1.PhaseCompleted && j.Status.Phase != eraserv1.PhaseFailed
		}
	}
	return false
}

// runningScanner says whether pod is an unfinished worker pod of the job
// with this UID whose scanner container has not ended. The container is
// read from the pod's status: the cache keeps the statuses, not the spec.
func runningScanner(pod *corev1.Pod, job types.UID) bool {
	if pod.Labels[podspec.LabelJob] == "" || !jobdata.SameRun(pod, job) || podspec.Finished(pod) {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == podspec.ScannerContainer && c.State.Terminated == nil {
			return true
		}
	}
	return false
}
