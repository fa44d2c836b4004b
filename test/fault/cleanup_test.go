package fault_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestSlowCleanupDoesNotHoldUpTheNextJob: the API server is slow to delete
// a finished job's pods (an admission webhook holds each delete, as a
// loaded API server or a slow webhook would). While that cleanup is stuck,
// a run-now request starts the next job, which creates its pods, runs and
// completes; once the deletes go through, the first job's cleanup ends too.
func TestSlowCleanupDoesNotHoldUpTheNextJob(t *testing.T) {
	s := newScenario(t, "fault-slowcleanup", nil)
	hold := newDeleteHold(t, s.ns)
	const nodes = 6
	s.addNodes(s.ns, nodes)
	s.startManager("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
		"manager: {imageJob: {cleanup: {delayOnSuccess: 0s, delayOnFailure: 0s, keepReportFor: 0s}}}\n")
	s.createList()

	// Held from before the job can finish: its cleanup may start the
	// moment it is recorded, before a test that waited for the end could
	// name the job to the hold.
	first := s.waitJob(3*time.Minute, "the first job to be created", nil, func(*eraserv1.ImageJob) bool { return true })
	hold.job.Store(first.Name)
	first = s.waitJob(3*time.Minute, "the first job to finish", func() { s.kubelet(nil) }, finished)
	// The pods of a finished job are deleted once the ImageList recorded
	// it and the report was read: wait until the first delete is held.
	select {
	case <-hold.seen:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the first job's pods were never deleted; job %s: %+v", first.Name, first.Status)
	}
	held := time.Now()

	list := s.getList()
	list.Annotations = map[string]string{eraserv1.AnnotationRunNow: ""}
	if err := env.Client.Update(s.ctx, list); err != nil {
		t.Fatal(err)
	}
	// The next job is seen through the list's record of it: with no
	// cleanup delay it may be gone a moment after it completed, between
	// two polls of the jobs.
	var next *eraserv1.ImageList
	testenv.WaitFor(t, 3*time.Minute, "the next job to complete while the first one's cleanup is held", func() bool {
		s.kubelet(nil)
		l := s.getList()
		if l.Status.Job != "" && l.Status.Job != first.Name {
			next = l
		}
		return next != nil
	})
	t.Logf("the next job %s recorded %v after the first job's cleanup was held (%d deletes held)",
		next.Status.Job, time.Since(held).Round(100*time.Millisecond), hold.count.Load())
	if c := meta.FindStatusCondition(next.Status.Conditions, eraserv1.ConditionReady); c == nil || c.Reason != eraserv1.ReasonSucceeded || next.Status.Success != nodes {
		t.Errorf("next job %s: Ready %+v, %d of %d succeeded", next.Status.Job, c, next.Status.Success, nodes)
	}
	// Still held: the first job and its pods are all there.
	var pods corev1.PodList
	if err := env.Client.List(s.ctx, &pods, client.InNamespace(s.ns), client.MatchingLabels{podspec.LabelJob: first.Name}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(s.ctx, client.ObjectKey{Name: first.Name}, &eraserv1.ImageJob{}); err != nil || len(pods.Items) != nodes {
		t.Fatalf("the hold did not hold: first job %v, %d of its pods left", err, len(pods.Items))
	}

	hold.release()
	testenv.WaitFor(t, 3*time.Minute, "the first job's cleanup to end", func() bool {
		err := env.Client.Get(s.ctx, client.ObjectKey{Name: first.Name}, &eraserv1.ImageJob{})
		return apierrors.IsNotFound(err)
	})
}

// deleteHold is a validating admission webhook that holds every delete of
// a pod of one job (job, once set) until released: each for at most 25 s
// (the webhook's timeout is 30 s), then refused, so that the hold lasts
// however long the next job takes on a busy machine (it once took over
// 30 s, and a delete let through then broke the test).
type deleteHold struct {
	job   atomic.Value // string
	seen  chan struct{}
	once  sync.Once
	count atomic.Int64
	done  chan struct{}
	stop  sync.Once
}

func (h *deleteHold) release() { h.stop.Do(func() { close(h.done) }) }

func newDeleteHold(t *testing.T, ns string) *deleteHold {
	t.Helper()
	h := &deleteHold{seen: make(chan struct{}), done: make(chan struct{})}
	h.job.Store("")
	certPEM, cert := selfSigned(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		var pod corev1.Pod
		_ = json.Unmarshal(review.Request.OldObject.Raw, &pod)
		allowed := true
		if job := h.job.Load().(string); job != "" && pod.Labels[podspec.LabelJob] == job {
			h.count.Add(1)
			h.once.Do(func() { close(h.seen) })
			select {
			case <-h.done:
			case <-time.After(25 * time.Second):
				allowed = false
			}
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: allowed}
		if !allowed {
			review.Response.Result = &metav1.Status{Message: "held by the test", Code: http.StatusTooManyRequests}
		}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	url := srv.URL
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-hold-deletes"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "hold-deletes.eraser.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: certPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](30),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := env.Client.Create(t.Context(), hook); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: the webhook goes before the
	// scenario's own cleanup deletes the pods.
	t.Cleanup(func() {
		h.release()
		_ = env.Client.Delete(t.Context(), hook)
		srv.Close()
	})
	return h
}

// selfSigned is a certificate for 127.0.0.1 that is its own CA.
func selfSigned(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "eraser-fault-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
