package scanservice

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// TestScanServiceAuthenticates: against a real API server, the scan
// service accepts the token the kubelet would project for a run's scanner
// (its audience, bound to its pod) and refuses the tokens a forger could
// get: another run's, one bound to no pod, the API server's own audience,
// and the scanner's own once its pod is gone.
func TestScanServiceAuthenticates(t *testing.T) {
	env := testenv.Require(t)
	ctx := context.Background()
	c := env.Client
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := "scan-auth"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() { _ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	must(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podspec.ServiceAccount}}))

	job := builder.MakeImageJob("scan-auth-run").Obj()
	must(c.Create(ctx, job))
	t.Cleanup(func() { _ = c.Delete(ctx, job) })
	other := builder.MakeImageJob("scan-auth-other-run").Obj()
	must(c.Create(ctx, other))
	t.Cleanup(func() { _ = c.Delete(ctx, other) })

	pod := builder.MakePod("scan-auth-worker", "node-a", time.Now()).Job(job.Name).Obj()
	pod.Namespace = ns
	pod.Spec.ServiceAccountName = podspec.ServiceAccount
	pod.Spec.Containers = []corev1.Container{{Name: podspec.ScannerContainer, Image: "scanner"}}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
	must(c.Create(ctx, pod))
	// The kubelet's word that the scanner runs, which is what the
	// manager's cache keeps of a pod's containers.
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.ScannerContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	must(c.Status().Update(ctx, pod))

	token := func(audience string, bound *corev1.Pod) string {
		t.Helper()
		req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)}}
		if bound != nil {
			req.Spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: bound.Name, UID: bound.UID}
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, podspec.ServiceAccount, req, metav1.CreateOptions{})
		must(err)
		return tr.Status.Token
	}
	reviewer := func() *TokenReviewer {
		return &TokenReviewer{
			Review: func(ctx context.Context, r *authv1.TokenReview) error { return c.Create(ctx, r) },
			// As the manager's cache holds the pod: trimmed.
			Pod: func(ctx context.Context, name string) (*corev1.Pod, error) {
				p := &corev1.Pod{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
					return nil, err
				}
				trimmed, err := cacheopts.TrimPod(p)
				return trimmed.(*corev1.Pod), err
			},
			IsScanner: runningScanner, Namespace: ns, ServiceAccount: podspec.ServiceAccount, Remember: time.Minute,
		}
	}
	runUID := string(job.UID)
	scannerToken := token(scanshare.AudienceOf(runUID), pod)

	who, err := reviewer().Scanner(ctx, scannerToken, runUID)
	if err != nil || who != (Scanner{Node: "node-a", Pod: pod.Name, PodUID: string(pod.UID)}) {
		t.Fatalf("the run's scanner: %+v, %v", who, err)
	}
	for name, tc := range map[string]struct{ token, run string }{
		"the scanner's token, for another run":           {token: scannerToken, run: string(other.UID)},
		"a token of another run's audience":              {token: token(scanshare.AudienceOf(string(other.UID)), pod), run: runUID},
		"a token of the run's audience, bound to no pod": {token: token(scanshare.AudienceOf(runUID), nil), run: runUID},
		"a token for the API server":                     {token: token("https://kubernetes.default.svc", pod), run: runUID},
		"no token at all, just text":                     {token: "forged", run: runUID},
	} {
		if _, err := reviewer().Scanner(ctx, tc.token, tc.run); !errors.Is(err, ErrNotScanner) {
			t.Errorf("%s: %v, want refused as not a scanner", name, err)
		}
	}

	// Through the service over HTTP, in the scanners' wire format.
	addr := testenv.FreePort(t)
	srv := &Server{Verdicts: NewVerdicts(VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 4}),
		Auth: reviewer(), RetryAfter: time.Second, Log: logr.Discard()}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = (&Runnable{Addr: addr, Server: srv}).Start(sctx) }()
	key := scanshare.Key{Digest: "sha256:" + strings.Repeat("a", 64), Platform: "linux/amd64", DB: "sha256:" + strings.Repeat("b", 64), Policy: strings.Repeat("c", 64)}
	cl := &wireClient{base: "http://" + addr, run: runUID, token: scannerToken}
	var resp scanshare.ClaimResponse
	testenv.WaitFor(t, 30*time.Second, "the scan service to answer", func() bool {
		resp, err = cl.Claim(ctx, scanshare.ClaimRequest{Keys: []scanshare.Key{key}})
		return err == nil
	})
	if len(resp.Scan) != 1 {
		t.Fatalf("claim: %+v, want the key handed to the scanner", resp)
	}

	// The pod gone, its token proves nothing.
	must(c.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	testenv.WaitFor(t, 30*time.Second, "the pod to be gone", func() bool {
		_, err := reviewer().Scanner(ctx, scannerToken, runUID)
		return errors.Is(err, ErrNotScanner)
	})
}

// TestRunLive: a run is live while its ImageJob exists unfinished; its
// verdicts are forgotten once it completed, failed or was deleted.
func TestRunLive(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := eraserv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	job := func(uid string, phase eraserv1.JobPhase) *eraserv1.ImageJob {
		j := builder.MakeImageJob("job-" + uid).Phase(phase).Obj()
		j.UID = types.UID(uid)
		return j
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		job("running", eraserv1.PhaseRunning), job("completed", eraserv1.PhaseCompleted), job("failed", eraserv1.PhaseFailed), job("new", "")).Build()
	got := map[string]bool{}
	for _, uid := range []string{"running", "completed", "failed", "new", "deleted"} {
		got[uid] = runLive(context.Background(), c, types.UID(uid))
	}
	want := map[string]bool{"running": true, "completed": false, "failed": false, "new": true, "deleted": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("live (-want +got):\n%s", diff)
	}
}
