package scanservice

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

const (
	oldLeader = "http://10.0.0.5:8890"
	newLeader = "http://10.0.0.9:8890"
)

var runDB = scanshare.DBAnnotation("registry.example/trivy-db:2", "sha256:"+strings.Repeat("d", 64))

// TestToAnnounce: a new leader tells the pods whose scanner may still ask
// for the service and was told a previous leader's address; not the pods
// it made, nor those whose scanner ended, nor those that share nothing.
func TestToAnnounce(t *testing.T) {
	now := time.Now()
	pod := func(name string) *builder.PodWrapper {
		return builder.MakePod(name, "node-"+name, now).Job("run")
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want []string
	}{
		"scanner running, old address":  {pod: pod("a").Annotate(scanshare.AnnotationService, oldLeader).Running(now).Obj(), want: []string{"a"}},
		"scanner not started yet":       {pod: pod("b").Annotate(scanshare.AnnotationService, oldLeader).Waiting(podspec.ScannerContainer, "ContainerCreating").Obj(), want: []string{"b"}},
		"already told this address":     {pod: pod("c").Annotate(scanshare.AnnotationService, newLeader).Running(now).Obj()},
		"scanner ended":                 {pod: pod("d").Annotate(scanshare.AnnotationService, oldLeader).Terminated(podspec.ScannerContainer, 0, "").Obj()},
		"pod finished":                  {pod: pod("e").Annotate(scanshare.AnnotationService, oldLeader).Phase(corev1.PodSucceeded).Obj()},
		"no scan service (scans alone)": {pod: pod("f").Running(now).Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, toAnnounce([]corev1.Pod{*tc.pod}, newLeader)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestArchivesOf: a new leader fetches the DB archives the running
// scanners were told of, each once, and not those of ended scanners.
func TestArchivesOf(t *testing.T) {
	now := time.Now()
	a := scanshare.DBAnnotation("registry.example/trivy-db:2", "sha256:"+strings.Repeat("a", 64))
	b := scanshare.DBAnnotation("registry.example/trivy-db:2", "sha256:"+strings.Repeat("b", 64))
	pods := []corev1.Pod{
		*builder.MakePod("p1", "n1", now).Annotate(scanshare.AnnotationDB, a).Running(now).Obj(),
		*builder.MakePod("p2", "n2", now).Annotate(scanshare.AnnotationDB, a).Obj(),
		*builder.MakePod("p3", "n3", now).Annotate(scanshare.AnnotationDB, b).Terminated(podspec.ScannerContainer, 0, "").Obj(),
		*builder.MakePod("p4", "n4", now).Annotate(scanshare.AnnotationDB, "not an archive").Obj(),
	}
	want := [][2]string{{"registry.example/trivy-db:2", "sha256:" + strings.Repeat("a", 64)}}
	if diff := cmp.Diff(want, archivesOf(pods)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestAnnouncerTellsRunningScanners: against a real API server, a new
// leader starts fetching the run's DB archive and rewrites the address on
// the worker pods whose scanner still runs, read through the manager's
// trimmed cache, and leaves the ended ones as they were.
func TestAnnouncerTellsRunningScanners(t *testing.T) {
	env := testenv.Require(t)
	ctx := context.Background()
	c := env.Client
	ns := "scan-announce"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	now := time.Now()
	for name, ended := range map[string]bool{"running": false, "ended": true} {
		pod := builder.MakePod(name, "node-"+name, now).Job("run").Annotate(scanshare.AnnotationService, oldLeader).Annotate(scanshare.AnnotationDB, runDB).Obj()
		pod.Namespace = ns
		pod.Spec.Containers = []corev1.Container{{Name: podspec.ScannerContainer, Image: "scanner"}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		if ended {
			state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.ScannerContainer, State: state}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	cached := newCachedClient(t, env, ns)
	var fetched []string
	a := &announcer{c: cached, ns: ns, url: newLeader, log: logr.Discard(), retry: time.Second,
		fetch: func(repo, digest string) { fetched = append(fetched, scanshare.DBAnnotation(repo, digest)) }}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := a.Start(actx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, name := range []string{"running", "ended"} {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		got[name] = pod.Annotations[scanshare.AnnotationService]
	}
	if diff := cmp.Diff(map[string]string{"running": newLeader, "ended": oldLeader}, got); diff != "" {
		t.Errorf("addresses after the announcement (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{runDB}, fetched); diff != "" {
		t.Errorf("archives fetched for the running scanners (-want +got):\n%s", diff)
	}
}

// newCachedClient reads pods through a cache made with the manager's cache
// options (its trimming), and writes to the API server, as the manager's
// client does.
func newCachedClient(t *testing.T, env *testenv.Env, ns string) client.Client {
	t.Helper()
	opts, _ := cacheopts.Options(ns)
	opts.Scheme = env.Client.Scheme()
	cc, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = cc.Start(ctx) }()
	c, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: cc}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
