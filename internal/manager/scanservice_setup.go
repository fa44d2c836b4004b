package manager

import (
	"context"
	"fmt"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/scanservice"
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
	scanTokenRemember = 5 * time.Minute
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// setupScanService adds the leader's scan service, when the worker pods
// can be told where it is.
func setupScanService(mgr ctrl.Manager, opts Options) error {
	if opts.ScanServiceURL() == "" {
		return nil
	}
	verdicts := scanservice.NewVerdicts(scanservice.VerdictOptions{Budget: scanVerdictBudget, Lease: scanClaimLease, Grant: scanClaimGrant})
	for _, c := range scanservice.Collectors(verdicts) {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("registering the scan service's metrics: %w", err)
		}
	}
	c := mgr.GetClient()
	auth := &scanservice.TokenReviewer{
		Review: func(ctx context.Context, r *authv1.TokenReview) error { return c.Create(ctx, r) },
		Pod: func(ctx context.Context, name string) (*corev1.Pod, error) {
			pod := &corev1.Pod{}
			return pod, c.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: name}, pod)
		},
		IsScanner:      runningScanner,
		Namespace:      opts.Namespace,
		ServiceAccount: podspec.ServiceAccount,
		Remember:       scanTokenRemember,
	}
	return mgr.Add(&scanservice.Runnable{Addr: opts.ScanServiceAddr, Server: &scanservice.Server{
		Verdicts: verdicts, Auth: auth, RetryAfter: scanRetryAfter, Log: mgr.GetLogger().WithName("scan-service"),
	}})
}

// runningScanner says whether pod is an unfinished worker pod of the job
// with this UID that runs a scanner.
func runningScanner(pod *corev1.Pod, job types.UID) bool {
	if pod.Labels[podspec.LabelJob] == "" || !jobdata.SameRun(pod, job) || podspec.Finished(pod) {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == podspec.ScannerContainer {
			return true
		}
	}
	return false
}
