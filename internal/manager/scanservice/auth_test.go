package scanservice

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

const workerAccount = "system:serviceaccount:eraser-system:eraser-imagejob-pods"

// jwt makes a token with these claims, signed by nobody: what the
// service reads before a review, and what a forger can make.
func jwt(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "RS256", "kid": "k"}) + "." + enc(claims) + ".c2lnbmF0dXJl"
}

// scannerClaims are the claims of the token the kubelet projects for
// pod worker-a of the run.
func scannerClaims() map[string]any {
	return map[string]any{"aud": []string{scanshare.AudienceOf(runUID)}, "sub": workerAccount, "exp": time.Now().Add(time.Hour).Unix(),
		"kubernetes.io": map[string]any{"namespace": "eraser-system", "pod": map[string]string{"name": "worker-a", "uid": "pod-uid-a"}}}
}

func with(c map[string]any, key string, v any) map[string]any {
	c[key] = v
	return c
}

// fakeCluster is the API server's and the cache's side of a reviewer.
type fakeCluster struct {
	status    authv1.TokenReviewStatus
	reviewErr error
	pod       *corev1.Pod
	ofRun     bool
	reviews   int
}

func (f *fakeCluster) reviewer(t *testing.T) *TokenReviewer {
	return &TokenReviewer{
		Review: func(_ context.Context, r *authv1.TokenReview) error {
			f.reviews++
			if len(r.Spec.Audiences) != 1 || r.Spec.Audiences[0] != scanshare.AudienceOf(runUID) {
				t.Errorf("review spec %+v", r.Spec)
			}
			r.Status = f.status
			return f.reviewErr
		},
		Pod: func(_ context.Context, name string) (*corev1.Pod, error) {
			if f.pod == nil || f.pod.Name != name {
				return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
			}
			return f.pod, nil
		},
		IsScanner:       func(*corev1.Pod, types.UID) bool { return f.ofRun },
		Namespace:       "eraser-system",
		ServiceAccount:  "eraser-imagejob-pods",
		Remember:        time.Minute,
		RememberRefusal: time.Minute,
	}
}

var (
	boundUser = authv1.UserInfo{Username: workerAccount,
		Extra: map[string]authv1.ExtraValue{extraPodName: {"worker-a"}, extraPodUID: {"pod-uid-a"}}}
	authenticated = authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)}, User: boundUser}
)

func workerA() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", UID: "pod-uid-a"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
}

// TestTokenReviewer: what the API server and the cache say of a token, and
// what a token that could not be a scanner's costs: no review at all.
func TestTokenReviewer(t *testing.T) {
	scannerToken := jwt(scannerClaims())
	for name, tc := range map[string]struct {
		token      string
		cluster    fakeCluster
		want       Scanner
		notScanner bool
		reviews    int
	}{
		"a running scanner of the run": {
			token: scannerToken, cluster: fakeCluster{status: authenticated, pod: workerA(), ofRun: true},
			want: Scanner{Node: "node-a", Pod: "worker-a", PodUID: "pod-uid-a"}, reviews: 1,
		},
		"not authenticated": {
			token: scannerToken, cluster: fakeCluster{status: authv1.TokenReviewStatus{Error: "token has expired"}, pod: workerA(), ofRun: true},
			notScanner: true, reviews: 1,
		},
		"the API server says another audience": {
			token:      scannerToken,
			cluster:    fakeCluster{status: authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"https://kubernetes.default.svc"}, User: boundUser}, pod: workerA(), ofRun: true},
			notScanner: true, reviews: 1,
		},
		"the API server says another ServiceAccount": {
			token: scannerToken,
			cluster: fakeCluster{status: authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)},
				User: authv1.UserInfo{Username: "system:serviceaccount:tenant:default", Extra: boundUser.Extra}}, pod: workerA(), ofRun: true},
			notScanner: true, reviews: 1,
		},
		"the API server says bound to no pod": {
			token: scannerToken,
			cluster: fakeCluster{status: authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)},
				User: authv1.UserInfo{Username: workerAccount}}, pod: workerA(), ofRun: true},
			notScanner: true, reviews: 1,
		},
		"the API server unreachable": {
			token: scannerToken, cluster: fakeCluster{reviewErr: errors.New("connection refused"), pod: workerA(), ofRun: true}, reviews: 1,
		},
		// Refused on the token's own claims, without a review.
		"random text": {
			token: "forged", cluster: fakeCluster{status: authenticated, pod: workerA(), ofRun: true}, notScanner: true,
		},
		"an unsigned token": {
			token:      strings.Replace(scannerToken, scannerToken[:strings.Index(scannerToken, ".")], base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)), 1),
			cluster:    fakeCluster{status: authenticated, pod: workerA(), ofRun: true},
			notScanner: true,
		},
		"another run's audience": {
			token:   jwt(with(scannerClaims(), "aud", scanshare.AudienceOf("another-run"))),
			cluster: fakeCluster{status: authenticated, pod: workerA(), ofRun: true}, notScanner: true,
		},
		"the API server's audience": {
			token:   jwt(with(scannerClaims(), "aud", "https://kubernetes.default.svc")),
			cluster: fakeCluster{status: authenticated, pod: workerA(), ofRun: true}, notScanner: true,
		},
		"another ServiceAccount": {
			token:   jwt(with(scannerClaims(), "sub", "system:serviceaccount:tenant:default")),
			cluster: fakeCluster{status: authenticated, pod: workerA(), ofRun: true}, notScanner: true,
		},
		"bound to no pod": {
			token:   jwt(with(scannerClaims(), "kubernetes.io", map[string]any{"namespace": "eraser-system"})),
			cluster: fakeCluster{status: authenticated, pod: workerA(), ofRun: true}, notScanner: true,
		},
		"the pod is gone": {
			token: scannerToken, cluster: fakeCluster{status: authenticated}, notScanner: true,
		},
		"a pod of that name, recreated": {
			token:      scannerToken,
			cluster:    fakeCluster{status: authenticated, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", UID: "pod-uid-b"}}, ofRun: true},
			notScanner: true,
		},
		"a worker pod of another run, or finished": {
			token: scannerToken, cluster: fakeCluster{status: authenticated, pod: workerA()}, notScanner: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := tc.cluster.reviewer(t)
			got, err := a.Scanner(context.Background(), tc.token, runUID)
			if errors.Is(err, ErrNotScanner) != tc.notScanner || (err == nil) != (tc.want != Scanner{}) || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v (not a scanner: %v)", got, err, tc.want, tc.notScanner)
			}
			if tc.cluster.reviews != tc.reviews {
				t.Fatalf("%d reviews, want %d", tc.cluster.reviews, tc.reviews)
			}
			// Asked again: a review's answer is reused, a failure to get one
			// is not.
			again, err2 := a.Scanner(context.Background(), tc.token, runUID)
			if again != got || (err == nil) != (err2 == nil) {
				t.Fatalf("asked again: %+v, %v; want %+v, %v", again, err2, got, err)
			}
			want := tc.reviews
			if tc.cluster.reviewErr != nil {
				want++
			}
			if tc.cluster.reviews != want {
				t.Fatalf("asked again: %d reviews in all, want %d", tc.cluster.reviews, want)
			}
		})
	}
}

// TestTokenReviewerRechecksThePod: a scanner's token, accepted once, is
// refused as soon as the cache says its pod finished, is gone, or is
// another pod of the same name; no review is sent again.
func TestTokenReviewerRechecksThePod(t *testing.T) {
	token := jwt(scannerClaims())
	for name, change := range map[string]func(f *fakeCluster){
		"finished": func(f *fakeCluster) { f.ofRun = false },
		"deleted":  func(f *fakeCluster) { f.pod = nil },
		"recreated, same name": func(f *fakeCluster) {
			f.pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", UID: "pod-uid-b"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCluster{status: authenticated, pod: workerA(), ofRun: true}
			a := f.reviewer(t)
			if _, err := a.Scanner(context.Background(), token, runUID); err != nil {
				t.Fatal(err)
			}
			change(f)
			if _, err := a.Scanner(context.Background(), token, runUID); !errors.Is(err, ErrNotScanner) {
				t.Fatalf("after the pod %s: %v, want refused", name, err)
			}
			if f.reviews != 1 {
				t.Fatalf("%d reviews, want the first alone", f.reviews)
			}
		})
	}
}

// TestTokenReviewerForgets: a scanner's answer lasts Remember, or until its
// token expires if sooner; a refusal lasts RememberRefusal.
func TestTokenReviewerForgets(t *testing.T) {
	now := time.Now()
	for name, tc := range map[string]struct {
		expires time.Duration
		status  authv1.TokenReviewStatus
		after   time.Duration
		reviews int
	}{
		"a scanner's answer, within Remember":       {expires: time.Hour, status: authenticated, after: 59 * time.Second, reviews: 1},
		"a scanner's answer, past Remember":         {expires: time.Hour, status: authenticated, after: 61 * time.Second, reviews: 2},
		"a scanner's answer, past the token's life": {expires: 10 * time.Second, status: authenticated, after: 11 * time.Second, reviews: 2},
		"a refusal, within RememberRefusal":         {expires: time.Hour, after: 59 * time.Second, reviews: 1},
		"a refusal, past RememberRefusal":           {expires: time.Hour, after: 61 * time.Second, reviews: 2},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCluster{status: tc.status, pod: workerA(), ofRun: true}
			a := f.reviewer(t)
			clock := now
			a.Now = func() time.Time { return clock }
			token := jwt(with(scannerClaims(), "exp", now.Add(tc.expires).Unix()))
			_, _ = a.Scanner(context.Background(), token, runUID)
			clock = now.Add(tc.after)
			_, _ = a.Scanner(context.Background(), token, runUID)
			if f.reviews != tc.reviews {
				t.Fatalf("%d reviews, want %d", f.reviews, tc.reviews)
			}
		})
	}
}

// TestTokenReviewerBoundsReviews: past its TokenReviews' bound the
// reviewer answers at once with when to ask again; forged tokens that
// pass the claims' check (the right claims, a made-up signature) cost
// the API server no more than the bound.
func TestTokenReviewerBoundsReviews(t *testing.T) {
	f := &fakeCluster{status: authv1.TokenReviewStatus{Error: "invalid signature"}, pod: workerA(), ofRun: true}
	a := f.reviewer(t)
	now := time.Now()
	a.Now = func() time.Time { return now }
	a.Reviews = rate.NewLimiter(2, 5)
	got := map[string]int{}
	for i := range 100 {
		_, err := a.Scanner(context.Background(), jwt(with(scannerClaims(), "jti", i)), runUID)
		var busy *BusyError
		switch {
		case errors.As(err, &busy) && busy.RetryAfter > 0 && busy.RetryAfter <= time.Second:
			got["busy"]++
		case errors.Is(err, ErrNotScanner):
			got["refused"]++
		default:
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if diff := cmp.Diff(map[string]int{"refused": 5, "busy": 95}, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if f.reviews != 5 {
		t.Errorf("%d reviews, want the burst of 5", f.reviews)
	}
	now = now.Add(time.Second)
	if _, err := a.Scanner(context.Background(), jwt(with(scannerClaims(), "jti", "later")), runUID); !errors.Is(err, ErrNotScanner) || f.reviews != 6 {
		t.Errorf("a second later: %v after %d reviews, want a review", err, f.reviews)
	}
}
