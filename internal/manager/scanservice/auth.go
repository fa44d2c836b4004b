package scanservice

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// The extra fields the API server puts on a token bound to a pod.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// TokenReviewer authenticates scanners by the ServiceAccount token the
// kubelet projects into their container, with the run's audience: the API
// server says whose token it is and which pod it is bound to, and the
// manager's cache says whether that pod is a running scanner of the run.
// A token of another run has another audience; a token of any other pod
// or account names another pod; neither is accepted.
type TokenReviewer struct {
	// Review sends a TokenReview to the API server.
	Review func(context.Context, *authv1.TokenReview) error
	// Pod reads a pod of the manager's namespace from the cache.
	Pod func(ctx context.Context, name string) (*corev1.Pod, error)
	// IsScanner says whether pod is a running worker pod of the run with
	// this job UID.
	IsScanner func(pod *corev1.Pod, jobUID types.UID) bool
	// Namespace and ServiceAccount are the worker pods'.
	Namespace, ServiceAccount string
	// Remember is how long a review's answer is reused for the same token,
	// so that a run costs the API server one review per scanner, not one
	// per request.
	Remember time.Duration
	Now      func() time.Time

	mu   sync.Mutex
	seen map[[sha256.Size]byte]remembered
}

type remembered struct {
	who   Scanner
	until time.Time
}

// maxRemembered bounds the answers kept: a run has one token per node.
const maxRemembered = 20000

// Scanner implements Authenticator.
func (a *TokenReviewer) Scanner(ctx context.Context, token, jobUID string) (Scanner, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	sum := sha256.Sum256([]byte(jobUID + "\x00" + token))
	a.mu.Lock()
	if r, ok := a.seen[sum]; ok && now().Before(r.until) {
		a.mu.Unlock()
		return r.who, nil
	}
	a.mu.Unlock()

	audience := scanshare.AudienceOf(jobUID)
	review := &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := a.Review(ctx, review); err != nil {
		return Scanner{}, fmt.Errorf("reviewing the token: %w", err)
	}
	st := review.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, audience) {
		why := st.Error
		if why == "" {
			why = "the API server did not authenticate the token for audience " + audience
		}
		return Scanner{}, fmt.Errorf("%w: %s", ErrNotScanner, why)
	}
	if want := "system:serviceaccount:" + a.Namespace + ":" + a.ServiceAccount; st.User.Username != want {
		return Scanner{}, fmt.Errorf("%w: the token is %s's, not %s's", ErrNotScanner, st.User.Username, want)
	}
	name, uid := one(st.User.Extra[extraPodName]), one(st.User.Extra[extraPodUID])
	if name == "" || uid == "" {
		return Scanner{}, fmt.Errorf("%w: the token is not bound to a pod", ErrNotScanner)
	}
	pod, err := a.Pod(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return Scanner{}, fmt.Errorf("%w: pod %s does not exist", ErrNotScanner, name)
	case err != nil:
		return Scanner{}, fmt.Errorf("reading pod %s: %w", name, err)
	}
	if string(pod.UID) != uid || !a.IsScanner(pod, types.UID(jobUID)) {
		return Scanner{}, fmt.Errorf("%w: pod %s is not a running worker pod of job %s", ErrNotScanner, name, jobUID)
	}
	who := Scanner{Node: pod.Spec.NodeName, Pod: pod.Name, PodUID: uid}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil || len(a.seen) >= maxRemembered {
		a.seen = map[[sha256.Size]byte]remembered{}
	}
	a.seen[sum] = remembered{who: who, until: now().Add(a.Remember)}
	return who, nil
}

func one(v authv1.ExtraValue) string {
	if len(v) != 1 {
		return ""
	}
	return v[0]
}
