package fault_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// scanConfig runs a scheduled run with the scanner at start-up and no
// other for a day; finished jobs are kept an hour, so that the test can
// read them.
const scanConfig = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
	"manager: {scheduling: {repeatInterval: 24h, beginImmediately: true}, imageJob: {cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}}\n" +
	"components: {collector: {enabled: true}, scanner: {enabled: true}}\n"

// scanHarness is a scheduled run whose worker pods the test plays as
// their kubelets would (running, the scanner container started), and the
// leader's scan service, which the test calls as the run's scanners do:
// with tokens the API server issues for those pods (TokenRequest, bound to
// the pod, with the run's audience), over HTTP, each pod from its own
// loopback address as each pod has its own IP.
type scanHarness struct {
	t    *testing.T
	s    *scenario
	mgr  *managertest.Process
	base string
	job  eraserv1.ImageJob
	// pods are the run's worker pods by name, as the test last wrote them.
	pods map[string]*corev1.Pod
	cs   kubernetes.Interface
	// sources hands each client its own source address.
	sources atomic.Int32
}

// newScanHarness starts the manager with its scan service on loopback and
// waits until its scheduled run has a running scanner on each node.
func newScanHarness(t *testing.T, ns string, nodes int) *scanHarness {
	t.Helper()
	s := newScenario(t, ns, nil)
	s.resetScheduleState()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podspec.ServiceAccount}}
	if err := env.Client.Create(s.ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s.addNodes(ns, nodes)
	addr := testenv.FreePort(t)
	// No writable DB directory: the run's scanners would fetch their own
	// DB, and the manager fetches none (the test has no registry).
	m := s.manager()
	m.Env = []string{"POD_IP=127.0.0.1"}
	mgr := m.Start(t, scanConfig, "--scan-service-bind-address="+addr, "--scan-db-dir=/dev/null/scan-db")
	h := &scanHarness{t: t, s: s, mgr: mgr, base: "http://" + addr, pods: map[string]*corev1.Pod{}, cs: kubernetes.NewForConfigOrDie(env.Config)}
	testenv.WaitFor(t, 2*time.Minute, "the scheduled run's pods on every node", func() bool {
		jobs := s.scheduledJobs()
		if len(jobs) != 1 {
			return false
		}
		h.job = jobs[0]
		return len(s.podsOf(h.job.UID)) == nodes
	})
	for _, p := range s.podsOf(h.job.UID) {
		h.setScanner(p.Name, func(p *corev1.Pod) {
			now := metav1.Now()
			p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &now
			p.Status.ContainerStatuses = nil
			for _, c := range []string{podspec.CollectorContainer, podspec.ScannerContainer, podspec.RemoverContainer} {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c, Ready: true,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
			}
		})
	}
	testenv.WaitFor(t, time.Minute, "the scan service to listen", func() bool { return len(mgr.Lines("scan service listening")) > 0 })
	// The service judges a scanner by the manager's cache of the run's
	// pods, which sees the statuses written above a moment later: each
	// pod's scanner is accepted once before a test's first request counts.
	for i, name := range h.podNames() {
		c := h.scanClient(name)
		key := scanKey(1_000_000 + i)
		testenv.WaitFor(t, time.Minute, "the scan service to take pod "+name+" for a running scanner", func() bool {
			_, code, _ := c.claim(key)
			return code == http.StatusOK
		})
	}
	return h
}

// podNames are the run's pods' names, in the order of their nodes.
func (h *scanHarness) podNames() []string {
	var out []string
	for _, n := range h.s.nodes {
		for name, p := range h.pods {
			if p.Spec.NodeName == n {
				out = append(out, name)
			}
		}
	}
	return out
}

// setScanner writes the status of the named pod, as its kubelet does.
func (h *scanHarness) setScanner(name string, change func(*corev1.Pod)) {
	h.t.Helper()
	testenv.WaitFor(h.t, 30*time.Second, "the status of pod "+name, func() bool {
		p := &corev1.Pod{}
		if env.Client.Get(h.s.ctx, client.ObjectKey{Namespace: h.s.ns, Name: name}, p) != nil {
			return false
		}
		change(p)
		if env.Client.Status().Update(h.s.ctx, p) != nil {
			return false
		}
		h.pods[name] = p
		return true
	})
}

// finish ends the named pod's scanner, and the pod, as the kubelet reports
// a worker that is done.
func (h *scanHarness) finish(name string) {
	h.setScanner(name, func(p *corev1.Pod) {
		now := metav1.Now()
		sum := workerresult.Summary{Component: "remover", Node: p.Spec.NodeName, Counts: map[string]int{"removed": 1}}
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = nil
		for _, c := range []string{podspec.CollectorContainer, podspec.ScannerContainer, podspec.RemoverContainer} {
			term := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}
			if c == podspec.RemoverContainer {
				term.Message = string(sum.Encode())
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c, State: corev1.ContainerState{Terminated: term}})
		}
	})
}

// token is what the API server issues for the named pod's account with
// that audience, bound to the pod: the kubelet projects the run's one.
func (h *scanHarness) token(name, audience string) string {
	h.t.Helper()
	p := h.pods[name]
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](scanshare.TokenTTL),
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}}
	tr, err := h.cs.CoreV1().ServiceAccounts(h.s.ns).CreateToken(h.s.ctx, podspec.ServiceAccount, req, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return tr.Status.Token
}

// scanClient is the named pod's scanner: its token for the run, from its
// own address.
func (h *scanHarness) scanClient(name string) *scanClient {
	h.t.Helper()
	return h.clientWith(h.token(name, scanshare.AudienceOf(string(h.job.UID))), string(h.job.UID))
}

// clientWith calls the service with any token, for any run's paths, from
// an address of its own.
func (h *scanHarness) clientWith(token, job string) *scanClient {
	n := h.sources.Add(1)
	return &scanClient{base: h.base, job: job, token: token, http: fromAddress(fmt.Sprintf("127.0.1.%d", n))}
}

// fromAddress is an HTTP client whose connections leave from that
// loopback address.
func fromAddress(ip string) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}).DialContext
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t, Timeout: 40 * time.Second}
}

// scanClient speaks the scan service's protocol as a scanner does, and
// reports each answer's status instead of judging it.
type scanClient struct {
	base, job, token string
	http             *http.Client
}

func (c *scanClient) claim(keys ...scanshare.Key) (scanshare.ClaimResponse, int, error) {
	var out scanshare.ClaimResponse
	code, err := c.post(scanshare.ClaimPath, scanshare.ClaimRequest{Keys: keys}, &out)
	return out, code, err
}

func (c *scanClient) share(req scanshare.ShareRequest) (scanshare.ShareResponse, int, error) {
	var out scanshare.ShareResponse
	code, err := c.post(scanshare.SharePath, req, &out)
	return out, code, err
}

// post sends body to path<job> and decodes a 200's answer into out.
func (c *scanClient) post(path string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, c.base+path+c.job, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp.StatusCode, err
	}
	return resp.StatusCode, json.Unmarshal(data, out)
}

// scanKey is image n's key.
func scanKey(n int) scanshare.Key {
	return scanshare.Key{Digest: fmt.Sprintf("sha256:%064x", n), Platform: "linux/amd64", DB: "sha256:" + strings.Repeat("d", 64), Policy: strings.Repeat("0", 64)}
}

// roundTrip claims image n, which nobody has claimed, and shares a clean
// verdict on it: what a scanner does for each image it scans.
func (c *scanClient) roundTrip(n int) error {
	k := scanKey(n)
	resp, code, err := c.claim(k)
	if err != nil || code != http.StatusOK || len(resp.Scan) != 1 || resp.Scan[0] != k {
		return fmt.Errorf("claim of image %d: %d %v %+v, want the key to scan", n, code, err, resp)
	}
	out, code, err := c.share(scanshare.ShareRequest{Verdicts: []scanshare.Shared{{Key: k, Scan: workerresult.Scan{Verdict: "clean"}}}})
	if err != nil || code != http.StatusOK || out.Stored != 1 {
		return fmt.Errorf("share of image %d: %d %v %+v, want it stored", n, code, err, out)
	}
	return nil
}

// TestScanServiceRefusesEndedScanners: the real manager binary, its scan
// service and real pod-bound tokens. Each scanner of the run claims and
// shares; once a pod's scanner has finished, or the pod is deleted, its
// token, accepted a moment before, is refused (403); a token of another
// run's audience is refused, and so is the run's token at another run's
// paths; the other scanners go on.
func TestScanServiceRefusesEndedScanners(t *testing.T) {
	h := newScanHarness(t, "fault-scan-ended", 3)
	names := h.podNames()
	finished, deleted, running := names[0], names[1], names[2]
	clients := map[string]*scanClient{}
	for i, name := range names {
		clients[name] = h.scanClient(name)
		if err := clients[name].roundTrip(i); err != nil {
			t.Fatalf("the scanner of pod %s: %v", name, err)
		}
	}

	other := "5d1c0f2e-0000-4000-8000-00000000abcd"
	for what, c := range map[string]*scanClient{
		"a token of another run's audience, bound to a scanner of this run": h.clientWith(h.token(running, scanshare.AudienceOf(other)), string(h.job.UID)),
		"this run's scanner's token at another run's paths":                 h.clientWith(clients[running].token, other),
		"a token for the API server, bound to a scanner of this run":        h.clientWith(h.token(running, "https://kubernetes.default.svc"), string(h.job.UID)),
	} {
		if _, code, err := c.claim(scanKey(100)); code != http.StatusForbidden {
			t.Errorf("%s: %d %v, want 403", what, code, err)
		}
	}

	// Each checked on its own: a token still accepted is a failure of its
	// own, whatever the other's.
	h.finish(finished)
	if !refusedWithin(clients[finished], 101, 30*time.Second) {
		t.Errorf("the finished scanner's token is still accepted 30 s after its pod finished")
	}
	if err := env.Client.Delete(h.s.ctx, h.pods[deleted], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if !refusedWithin(clients[deleted], 102, 30*time.Second) {
		t.Errorf("the deleted pod's token is still accepted 30 s after the pod was deleted")
	}
	if err := clients[running].roundTrip(103); err != nil {
		t.Errorf("the running scanner after the others ended: %v", err)
	}
}

// refusedWithin says whether c's claims of image n are refused (403)
// before the deadline.
func refusedWithin(c *scanClient, n int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if _, code, _ := c.claim(scanKey(n)); code == http.StatusForbidden {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestScanServiceSurvivesBadTokenFlood: 10,000 requests with tokens that are
// no scanner's (random text, and tokens shaped as the API server's whose
// claims name another run, another account, a pod that does not exist, a
// pod under another UID, or no pod) are all refused, without a
// TokenReview: the API server counts (nearly) none. Tokens forged with a
// scanner's very claims, which only the API server can refuse, cost it no
// more reviews than the service's bound. Throughout, the leader keeps
// renewing its lease and a real scanner claims and shares.
func TestScanServiceSurvivesBadTokenFlood(t *testing.T) {
	h := newScanHarness(t, "fault-scan-flood", 2)
	names := h.podNames()
	scanner := h.scanClient(names[0])
	if err := scanner.roundTrip(0); err != nil {
		t.Fatal(err)
	}
	pod := h.pods[names[0]]
	job := string(h.job.UID)
	leases := watchLease(t, h.s.ns)

	// The real scanner goes on during the flood, at its own pace.
	var image atomic.Int32
	image.Store(1)
	stop := make(chan struct{})
	var during sync.WaitGroup
	var failed []error
	var mu sync.Mutex
	during.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if err := scanner.roundTrip(int(image.Add(1))); err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		}
	})

	reviews := tokenReviews(t)
	forged := func(i int) string {
		claims := map[string]any{"aud": []string{scanshare.AudienceOf(job)}, "sub": "system:serviceaccount:" + h.s.ns + ":" + podspec.ServiceAccount,
			"exp": time.Now().Add(time.Hour).Unix(), "jti": fmt.Sprint(i),
			"kubernetes.io": map[string]any{"namespace": h.s.ns, "pod": map[string]string{"name": pod.Name, "uid": string(pod.UID)}}}
		switch i % 6 {
		case 0:
			return randomText()
		case 1:
			claims["aud"] = []string{scanshare.AudienceOf("5d1c0f2e-0000-4000-8000-00000000abcd")}
		case 2:
			claims["sub"] = "system:serviceaccount:tenant:default"
		case 3:
			claims["kubernetes.io"] = map[string]any{"namespace": h.s.ns, "pod": map[string]string{"name": "no-such-pod", "uid": "u"}}
		case 4:
			claims["kubernetes.io"] = map[string]any{"namespace": h.s.ns, "pod": map[string]string{"name": pod.Name, "uid": "another-uid"}}
		case 5:
			delete(claims, "kubernetes.io")
		}
		return unsignedJWT(claims)
	}
	const flood = 10000
	codes := send(flood, 32, job, h.base, forged)
	t.Logf("%d forged requests answered %v", flood, codes)
	for code, n := range codes {
		if code != http.StatusForbidden && code != http.StatusTooManyRequests {
			t.Errorf("%d forged requests answered %d, want every one refused (403, or 429 past an address's bound)", n, code)
		}
	}
	if got := tokenReviews(t) - reviews; got > 5 {
		t.Errorf("the API server received %d TokenReviews during %d forged requests, want (nearly) none", got, flood)
	}

	// A scanner's own claims with a made-up signature: only a review can
	// tell them apart, and the service sends no more than its bound.
	reviews = tokenReviews(t)
	started := time.Now()
	const sameClaims = 400
	codes = send(sameClaims, 8, job, h.base, func(i int) string {
		return unsignedJWT(map[string]any{"aud": []string{scanshare.AudienceOf(job)}, "sub": "system:serviceaccount:" + h.s.ns + ":" + podspec.ServiceAccount,
			"jti": fmt.Sprint("same-claims-", i), "kubernetes.io": map[string]any{"namespace": h.s.ns, "pod": map[string]string{"name": pod.Name, "uid": string(pod.UID)}}})
	})
	elapsed := time.Since(started)
	t.Logf("%d tokens with a scanner's claims answered %v in %v", sameClaims, codes, elapsed.Round(time.Millisecond))
	for code, n := range codes {
		if code != http.StatusForbidden && code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests {
			t.Errorf("%d tokens with a scanner's claims answered %d, want refused (403), or told to wait (503, 429)", n, code)
		}
	}
	// The service's bound: 100 at once, 10 a second (internal/manager/scanservice/setup.go).
	if got, bound := tokenReviews(t)-reviews, 100+int(10*elapsed.Seconds())+5; got > bound {
		t.Errorf("%d TokenReviews for %d forged tokens in %v, want at most the bound %d", got, sameClaims, elapsed, bound)
	}

	close(stop)
	during.Wait()
	if len(failed) > 0 {
		t.Errorf("the real scanner failed %d round trips during the flood, the first: %v", len(failed), failed[0])
	}
	if err := scanner.roundTrip(int(image.Add(1))); err != nil {
		t.Errorf("the real scanner after the flood: %v", err)
	}
	leases.check(t, h.mgr)
}

// send sends n claims, shares and DB requests, with token(i), from 16
// loopback addresses, conc at a time, and counts the answers by status (0:
// no answer).
func send(n, conc int, job, base string, token func(int) string) map[int]int {
	clients := make([]*http.Client, 16)
	for i := range clients {
		clients[i] = fromAddress(fmt.Sprintf("127.0.2.%d", i+1))
	}
	paths := []string{scanshare.ClaimPath + job, scanshare.SharePath + job, scanshare.DBPath + job + "/sha256:" + strings.Repeat("d", 64)}
	var mu sync.Mutex
	codes := map[int]int{}
	next := atomic.Int32{}
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				path := paths[i%len(paths)]
				method, body := http.MethodPost, io.Reader(strings.NewReader(`{"keys":[]}`))
				if strings.HasPrefix(path, scanshare.DBPath) {
					method, body = http.MethodGet, nil
				}
				req, _ := http.NewRequest(method, base+path, body)
				req.Header.Set("Authorization", "Bearer "+token(i))
				code := 0
				if resp, err := clients[i%len(clients)].Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codes
}

func randomText() string {
	b := make([]byte, 24+len(fmt.Sprint(time.Now().UnixNano()))%16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// unsignedJWT is a token shaped as the API server's, with these claims and
// a signature nobody made.
func unsignedJWT(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	sig := make([]byte, 256)
	_, _ = rand.Read(sig)
	return enc(map[string]string{"alg": "RS256", "kid": "forged"}) + "." + enc(claims) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// tokenReviews is how many TokenReviews the API server answered since it
// started.
func tokenReviews(t *testing.T) int {
	t.Helper()
	return apiserverRequests(t, `resource="tokenreviews"`)
}

// leaseWatch follows the leader's Lease while a test runs.
type leaseWatch struct {
	mu      sync.Mutex
	holders map[string]bool
	renews  int
	// longest is the longest the renew time stood still, as seen.
	longest time.Duration
	stop    chan struct{}
	done    chan struct{}
}

// watchLease reads the leader's Lease four times a second until check.
func watchLease(t *testing.T, ns string) *leaseWatch {
	w := &leaseWatch{holders: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var last time.Time
		since := time.Now()
		for {
			lease := &coordinationv1.Lease{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: manager.LeaderElectionID}, lease); err == nil &&
				lease.Spec.RenewTime != nil && lease.Spec.HolderIdentity != nil {
				w.mu.Lock()
				w.holders[*lease.Spec.HolderIdentity] = true
				if rt := lease.Spec.RenewTime.Time; !rt.Equal(last) {
					w.renews++
					last, since = rt, time.Now()
				}
				w.longest = max(w.longest, time.Since(since))
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.stop:
		default:
			close(w.stop)
		}
		<-w.done
	})
	return w
}

// check asserts that one leader held the lease and renewed it throughout
// and after: never did its renew time stand still for a whole lease (15
// s), after which a standby would take over.
func (w *leaseWatch) check(t *testing.T, mgr *managertest.Process) {
	t.Helper()
	// A flood over in a second or two may fall between two renewals (every
	// 2 s): the lease must be seen renewed after it, too.
	testenv.WaitFor(t, 30*time.Second, "the lease to be renewed after the flood", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.renews >= 3
	})
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("lease: %d renewals seen, standing still at most %v, holders %v", w.renews, w.longest.Round(100*time.Millisecond), w.holders)
	if len(w.holders) != 1 || w.renews < 3 || w.longest >= 15*time.Second {
		t.Errorf("the leader's lease: holders %v, %d renewals, still for up to %v; want one holder renewing within the lease duration", w.holders, w.renews, w.longest)
	}
	if mgr.Exited() {
		t.Errorf("the manager exited")
	}
}

// TestScanServiceRefusesForgedVerdicts: with the real manager and real
// pod-bound tokens, a scanner's verdict on an image it was not handed to
// scan is refused, not stored: on one nobody claimed, and on one another
// scanner holds. The holder then shares its own verdict, and a third node
// is served that one, while the image nobody claimed is handed to the
// third node to scan. A verdict that removes, which the liar made on an
// image it asked for first, is never served to another node: that node
// scans it. And a flood of made-up images from the liar leaves the
// holder's verdict served.
func TestScanServiceRefusesForgedVerdicts(t *testing.T) {
	h := newScanHarness(t, "fault-scan-forged", 3)
	names := h.podNames()
	liar, holder, other := h.scanClient(names[0]), h.scanClient(names[1]), h.scanClient(names[2])
	unclaimed, held := scanKey(1), scanKey(2)
	if resp, code, err := holder.claim(held); err != nil || code != http.StatusOK || len(resp.Scan) != 1 || resp.Scan[0] != held {
		t.Fatalf("the holder's claim: %d %v %+v, want the key to scan", code, err, resp)
	}
	vulnerable := workerresult.Scan{Verdict: "vulnerable", Findings: []workerresult.Finding{{ID: "CVE-2099-0001", Severity: "CRITICAL", Package: "musl"}}}
	out, code, err := liar.share(scanshare.ShareRequest{Verdicts: []scanshare.Shared{{Key: unclaimed, Scan: vulnerable}, {Key: held, Scan: vulnerable}}})
	if err != nil || code != http.StatusOK || out.Stored != 0 || len(out.Refused) != 2 {
		t.Fatalf("the liar's shares: %d %v %+v, want both refused", code, err, out)
	}
	if resp, code, err := other.claim(unclaimed); err != nil || code != http.StatusOK || len(resp.Verdicts) != 0 || len(resp.Scan) != 1 {
		t.Errorf("a third node's claim of the image nobody claimed: %d %v %+v, want it to scan, no verdict", code, err, resp)
	}
	if out, code, err := holder.share(scanshare.ShareRequest{Verdicts: []scanshare.Shared{{Key: held, Scan: workerresult.Scan{Verdict: "clean"}}}}); err != nil || code != http.StatusOK || out.Stored != 1 {
		t.Fatalf("the holder's share: %d %v %+v, want it stored", code, err, out)
	}
	resp, code, err := other.claim(held)
	if err != nil || code != http.StatusOK || len(resp.Verdicts) != 1 || resp.Verdicts[0].Scan.Verdict != "clean" || resp.Verdicts[0].Pod != names[1] {
		t.Errorf("a third node's claim of the held image: %d %v %+v, want the holder's clean verdict", code, err, resp)
	}

	// The liar asks first for an image the others hold and forges a
	// verdict that removes: the next node is handed the image to scan
	// itself, never the forgery.
	first := scanKey(3)
	if resp, code, err := liar.claim(first); err != nil || code != http.StatusOK || len(resp.Scan) != 1 {
		t.Fatalf("the liar's claim: %d %v %+v, want the key to scan", code, err, resp)
	}
	if out, code, err := liar.share(scanshare.ShareRequest{Verdicts: []scanshare.Shared{{Key: first, Scan: vulnerable}}}); err != nil || code != http.StatusOK || out.Stored != 1 {
		t.Fatalf("the liar's share of its own claim: %d %v %+v, want it stored (its own node's verdict)", code, err, out)
	}
	if resp, code, err := holder.claim(first); err != nil || code != http.StatusOK || len(resp.Verdicts) != 0 || len(resp.Scan) != 1 {
		t.Errorf("another node's claim of the image the liar judged first: %d %v %+v, want it to scan, no verdict", code, err, resp)
	}

	// A flood of made-up images from the liar, ignoring 429s, fills only
	// its own share: the holder's verdict is still served.
	flooded := map[int]int{}
	for i := range 2000 {
		junk := []scanshare.Key{scanKey(1000 + 4*i), scanKey(1001 + 4*i), scanKey(1002 + 4*i), scanKey(1003 + 4*i)}
		resp, code, err := liar.claim(junk...)
		if err != nil {
			t.Fatalf("the flood's claim: %v", err)
		}
		flooded[code]++
		var share scanshare.ShareRequest
		for _, k := range resp.Scan {
			share.Verdicts = append(share.Verdicts, scanshare.Shared{Key: k, Scan: workerresult.Scan{Verdict: "clean"}})
		}
		if _, code, err := liar.share(share); err == nil {
			flooded[code]++
		}
	}
	resp, code, err = other.claim(held)
	if err != nil || code != http.StatusOK || len(resp.Verdicts) != 1 || resp.Verdicts[0].Pod != names[1] {
		t.Errorf("after the liar's flood (answers %v), a third node's claim of the held image: %d %v %+v, want the holder's verdict", flooded, code, err, resp)
	}
	t.Logf("the liar's flood was answered %v; the holder's verdict is still served", flooded)
}
