package workloadindex

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// request is what the API server is asked for.
type request struct {
	Path, LabelSelector, Accept string
	Watch                       bool
}

// TestSourcesAsk: every kind's list and watch ask for that kind's resource,
// cluster-wide and in protobuf, and the pod's leave out the worker pods; the
// reflector is given an object of the kind. No API server is needed: the
// requests are recorded and refused.
func TestSourcesAsk(t *testing.T) {
	var (
		mu  sync.Mutex
		got []request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		q := r.URL.Query()
		got = append(got, request{Path: r.URL.Path, LabelSelector: q.Get("labelSelector"),
			Accept: r.Header.Get("Accept"), Watch: q.Get("watch") == "true"})
		http.NotFound(w, r)
	}))
	defer srv.Close()
	idx, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	accept := "application/vnd.kubernetes.protobuf,application/json"
	ask := func(path, selector string) []request {
		return []request{{Path: path, LabelSelector: selector, Accept: accept},
			{Path: path, LabelSelector: selector, Accept: accept, Watch: true}}
	}
	want := map[string]struct {
		Example  string
		Requests []request
	}{
		"Pod":         {"Pod", ask("/api/v1/pods", "!eraser.sh/job")},
		"Deployment":  {"Deployment", ask("/apis/apps/v1/deployments", "")},
		"StatefulSet": {"StatefulSet", ask("/apis/apps/v1/statefulsets", "")},
		"DaemonSet":   {"DaemonSet", ask("/apis/apps/v1/daemonsets", "")},
		"ReplicaSet":  {"ReplicaSet", ask("/apis/apps/v1/replicasets", "")},
		"Job":         {"Job", ask("/apis/batch/v1/jobs", "")},
		"CronJob":     {"CronJob", ask("/apis/batch/v1/cronjobs", "")},
	}
	have := map[string]struct {
		Example  string
		Requests []request
	}{}
	ctx := context.Background()
	for _, s := range idx.sources {
		if _, dup := have[s.kind.String()]; dup {
			t.Errorf("%s is watched twice", s.kind)
		}
		// Both are refused; what matters is what they asked.
		_, _ = s.list(ctx, metav1.ListOptions{})
		if w, err := s.watch(ctx, metav1.ListOptions{}); err == nil {
			w.Stop()
		}
		mu.Lock()
		reqs := got
		got = nil
		mu.Unlock()
		have[s.kind.String()] = struct {
			Example  string
			Requests []request
		}{reflect.TypeOf(s.example).Elem().Name(), reqs}
	}
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
}

// TestStartFailsWithoutTheRules: where the role lacks a kind's list rule,
// Start returns at once with an error naming the kind and the setting,
// rather than leave a reflector retrying and every run waiting. Other
// kinds' answers do not matter here.
func TestStartFailsWithoutTheRules(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/batch/v1/cronjobs" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"cronjobs.batch is forbidden"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"List","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer srv.Close()
	idx, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = idx.Start(ctx)
	for _, want := range []string{"CronJob", "rbac.workloadProtection", "protectReferenced: false", "--reference-index=false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start: %v; want an error naming %q", err, want)
		}
	}
}
