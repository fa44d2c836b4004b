package scanservice

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
//
// Any pod can reach the service, so a request must cost the API server
// nothing unless it could be a scanner's: the token's own claims, read
// unverified, must name the run's audience, the workers' account and a
// pod the cache holds as a running scanner of the run before a
// TokenReview is sent, and the reviews sent are bounded (Reviews).
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
	// Remember is how long a review that authenticated a scanner is reused
	// for the same token, at most until the token expires, so that a run
	// costs the API server about one review per scanner and token, not one
	// per request. Each reuse checks the pod in the cache again: a
	// finished or deleted pod's token is refused at once.
	Remember time.Duration
	// RememberRefusal is how long a review that refused a token is reused:
	// the same forged token sent again costs nothing more.
	RememberRefusal time.Duration
	// Reviews bounds the TokenReviews sent; past it a request is answered
	// at once with a BusyError, never queued. Nil: unbounded.
	Reviews *rate.Limiter
	// Reviewed, when set, is told of each review sent: "authenticated",
	// "refused" or "failed" (no answer).
	Reviewed func(result string)
	Now      func() time.Time

	mu      sync.Mutex
	granted map[[sha256.Size]byte]remembered
	refused map[[sha256.Size]byte]remembered
}

type remembered struct {
	who Scanner
	// refusal is a refused token's error (ErrNotScanner).
	refusal error
	until   time.Time
}

// The answers kept: a run has one token per node (two around a token's
// renewal), and a refusal is only kept for a token that passed the claims'
// check, which junk does not.
const (
	maxRemembered = 20000
	maxRefusals   = 10000
)

// BusyError answers a request when the TokenReviews the service may send
// are spent: the scanner asks again after RetryAfter.
type BusyError struct{ RetryAfter time.Duration }

func (e *BusyError) Error() string {
	return fmt.Sprintf("too many tokens to review at the API server now; ask again in %v", e.RetryAfter)
}

func (a *TokenReviewer) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Scanner implements Authenticator.
func (a *TokenReviewer) Scanner(ctx context.Context, token, jobUID string) (Scanner, error) {
	now := a.now()
	sum := sha256.Sum256([]byte(jobUID + "\x00" + token))
	if r, ok := a.recall(sum, now); ok {
		if r.refusal != nil {
			return Scanner{}, r.refusal
		}
		if err := a.stillScanner(ctx, r.who.Pod, r.who.PodUID, jobUID); err != nil {
			a.mu.Lock()
			delete(a.granted, sum)
			a.mu.Unlock()
			return Scanner{}, err
		}
		return r.who, nil
	}

	audience := scanshare.AudienceOf(jobUID)
	claims, err := a.couldBeScanner(ctx, token, audience, jobUID)
	if err != nil {
		return Scanner{}, err
	}
	if a.Reviews != nil && !a.Reviews.AllowN(now, 1) {
		return Scanner{}, &BusyError{RetryAfter: untilToken(a.Reviews, now)}
	}
	who, err := a.review(ctx, token, audience, jobUID)
	switch {
	case err == nil:
		a.count("authenticated")
		until := now.Add(a.Remember)
		if !claims.Expiry.IsZero() && claims.Expiry.Before(until) {
			until = claims.Expiry
		}
		a.remember(sum, remembered{who: who, until: until})
		return who, nil
	case errors.Is(err, ErrNotScanner):
		a.count("refused")
		a.remember(sum, remembered{refusal: err, until: now.Add(a.RememberRefusal)})
	default:
		a.count("failed")
	}
	return Scanner{}, err
}

// couldBeScanner checks the token's own claims, unverified, against what a
// scanner's token of the run must say, and that the pod it names is one of
// the run's running scanners in the cache.
func (a *TokenReviewer) couldBeScanner(ctx context.Context, token, audience, jobUID string) (tokenClaims, error) {
	c, err := peekClaims(token)
	switch {
	case err != nil:
		return c, fmt.Errorf("%w: %w", ErrNotScanner, err)
	case !slices.Contains(c.Audiences, audience):
		return c, fmt.Errorf("%w: the token's audience is not %s", ErrNotScanner, audience)
	case c.Subject != a.subject():
		return c, fmt.Errorf("%w: the token says it is %s's, not %s's", ErrNotScanner, c.Subject, a.subject())
	case c.PodName == "":
		return c, fmt.Errorf("%w: the token says it is bound to no pod", ErrNotScanner)
	}
	return c, a.stillScanner(ctx, c.PodName, c.PodUID, jobUID)
}

func (a *TokenReviewer) subject() string {
	return "system:serviceaccount:" + a.Namespace + ":" + a.ServiceAccount
}

// stillScanner checks in the cache that the pod of that name, and of that
// UID when uid is set, is a running scanner of the run.
func (a *TokenReviewer) stillScanner(ctx context.Context, name, uid, jobUID string) error {
	pod, err := a.Pod(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: pod %s does not exist", ErrNotScanner, name)
	case err != nil:
		return fmt.Errorf("reading pod %s: %w", name, err)
	}
	if uid != "" && string(pod.UID) != uid {
		return fmt.Errorf("%w: pod %s is another pod than the token's (UID %s, not %s)", ErrNotScanner, name, pod.UID, uid)
	}
	if !a.IsScanner(pod, types.UID(jobUID)) {
		return fmt.Errorf("%w: pod %s is not a running worker pod of job %s", ErrNotScanner, name, jobUID)
	}
	return nil
}

// review asks the API server whose token it is, and checks the answer.
func (a *TokenReviewer) review(ctx context.Context, token, audience, jobUID string) (Scanner, error) {
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
	if want := a.subject(); st.User.Username != want {
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
	return Scanner{Node: pod.Spec.NodeName, Pod: pod.Name, PodUID: uid}, nil
}

func (a *TokenReviewer) count(result string) {
	if a.Reviewed != nil {
		a.Reviewed(result)
	}
}

// recall returns the unexpired answer kept for the token.
func (a *TokenReviewer) recall(sum [sha256.Size]byte, now time.Time) (remembered, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.granted[sum]; ok && now.Before(r.until) {
		return r, true
	}
	if r, ok := a.refused[sum]; ok && now.Before(r.until) {
		return r, true
	}
	return remembered{}, false
}

// remember keeps an answer. A full table first drops its expired answers;
// refusals that still do not fit are not kept (the reviews' bound holds
// regardless), and scanners' answers, which only real tokens make, start
// the table afresh.
func (a *TokenReviewer) remember(sum [sha256.Size]byte, r remembered) {
	a.mu.Lock()
	defer a.mu.Unlock()
	table, limit := &a.granted, maxRemembered
	if r.refusal != nil {
		table, limit = &a.refused, maxRefusals
	}
	if *table == nil {
		*table = map[[sha256.Size]byte]remembered{}
	}
	if len(*table) >= limit {
		now := a.now()
		maps.DeleteFunc(*table, func(_ [sha256.Size]byte, old remembered) bool { return !now.Before(old.until) })
	}
	if len(*table) >= limit {
		if r.refusal != nil {
			return
		}
		*table = map[[sha256.Size]byte]remembered{}
	}
	(*table)[sum] = r
}

func one(v authv1.ExtraValue) string {
	if len(v) != 1 {
		return ""
	}
	return v[0]
}
