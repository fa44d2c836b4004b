package scanservice

import (
	"context"
	"errors"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

func TestTokenReviewer(t *testing.T) {
	bound := authv1.UserInfo{Username: "system:serviceaccount:eraser-system:eraser-imagejob-pods",
		Extra: map[string]authv1.ExtraValue{extraPodName: {"worker-a"}, extraPodUID: {"pod-uid-a"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", UID: "pod-uid-a"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	for name, tc := range map[string]struct {
		status     authv1.TokenReviewStatus
		reviewErr  error
		pod        *corev1.Pod
		ofRun      bool
		want       Scanner
		notScanner bool
	}{
		"a running scanner of the run": {
			status: authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)}, User: bound},
			pod:    pod, ofRun: true,
			want: Scanner{Node: "node-a", Pod: "worker-a", PodUID: "pod-uid-a"},
		},
		"not authenticated": {
			status:     authv1.TokenReviewStatus{Error: "token has expired"},
			notScanner: true,
		},
		"another audience": {
			status:     authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"https://kubernetes.default.svc"}, User: bound},
			notScanner: true,
		},
		"another ServiceAccount": {
			status: authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)},
				User: authv1.UserInfo{Username: "system:serviceaccount:tenant:default", Extra: bound.Extra}},
			notScanner: true,
		},
		"a token bound to no pod": {
			status: authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)},
				User: authv1.UserInfo{Username: bound.Username}},
			notScanner: true,
		},
		"the pod is gone": {
			status:     authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)}, User: bound},
			notScanner: true,
		},
		"a pod of that name, recreated": {
			status: authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)}, User: bound},
			pod:    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", UID: "pod-uid-b"}}, ofRun: true,
			notScanner: true,
		},
		"a worker pod of another run": {
			status:     authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{scanshare.AudienceOf(runUID)}, User: bound},
			pod:        pod,
			notScanner: true,
		},
		"the API server unreachable": {
			reviewErr: errors.New("connection refused"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			reviews := 0
			a := &TokenReviewer{
				Review: func(_ context.Context, r *authv1.TokenReview) error {
					reviews++
					if r.Spec.Token != "tok" || len(r.Spec.Audiences) != 1 || r.Spec.Audiences[0] != scanshare.AudienceOf(runUID) {
						t.Errorf("review spec %+v", r.Spec)
					}
					r.Status = tc.status
					return tc.reviewErr
				},
				Pod: func(_ context.Context, name string) (*corev1.Pod, error) {
					if tc.pod == nil {
						return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
					}
					return tc.pod, nil
				},
				IsScanner:      func(*corev1.Pod, types.UID) bool { return tc.ofRun },
				Namespace:      "eraser-system",
				ServiceAccount: "eraser-imagejob-pods",
				Remember:       time.Minute,
			}
			got, err := a.Scanner(context.Background(), "tok", runUID)
			if errors.Is(err, ErrNotScanner) != tc.notScanner || (err == nil) != (tc.want != Scanner{}) || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v (not a scanner: %v)", got, err, tc.want, tc.notScanner)
			}
			if err == nil {
				if _, err := a.Scanner(context.Background(), "tok", runUID); err != nil || reviews != 1 {
					t.Fatalf("asked again: %v after %d reviews, want the first answer reused", err, reviews)
				}
			}
		})
	}
}
