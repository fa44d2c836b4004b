package workloadindex

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// flat is an entry as the tables spell it.
type flat struct {
	Key, Node string
	Images    []string // nil: does not count
}

func flatten(e *entry) flat {
	f := flat{Key: e.key, Node: e.node}
	if e.counts() {
		f.Images = strings.Split(e.images.Value(), "\n")
	}
	return f
}

func TestToEntry(t *testing.T) {
	const digest = "docker.io/library/nginx@sha256:0000000000000000000000000000000000000000000000000000000000000001"
	tests := []struct {
		name string
		obj  any
		want flat
	}{
		{"pending pod bound to a node: spec images of every kind", makePod("default", "web-0").node("n1").init("busybox:1.36").containers("nginx:1.27", "sidecar").ephemeral("debug:1").obj(),
			flat{"default/web-0", "n1", []string{"busybox:1.36", "debug:1", "nginx:1.27", "sidecar"}}},
		{"running pod: status image and imageID too", makePod("default", "web-1").node("n1").containers("nginx:1.27").phase(corev1.PodRunning).
			status("c", "docker.io/library/nginx:1.27", digest).obj(),
			flat{"default/web-1", "n1", []string{"docker.io/library/nginx:1.27", digest, "nginx:1.27"}}},
		{"init and ephemeral statuses", makePod("ns", "p").node("n2").init("i").containers("c").ephemeral("e").phase(corev1.PodRunning).
			status("init", "docker.io/library/i:latest", "sha-i").status("ephemeral", "docker.io/library/e:latest", "sha-e").obj(),
			flat{"ns/p", "n2", []string{"c", "docker.io/library/e:latest", "docker.io/library/i:latest", "e", "i", "sha-e", "sha-i"}}},
		{"empty status fields are skipped, duplicates kept once", makePod("ns", "p").node("n2").containers("a", "a").phase(corev1.PodPending).
			status("c", "", "").obj(),
			flat{"ns/p", "n2", []string{"a"}}},
		{"unbound pod", makePod("ns", "pending").containers("app:2").obj(), flat{"ns/pending", "", []string{"app:2"}}},
		{"succeeded pod does not count", makePod("ns", "done").node("n1").containers("app").phase(corev1.PodSucceeded).obj(), flat{"ns/done", "n1", nil}},
		{"failed pod does not count", makePod("ns", "failed").node("n1").containers("app").phase(corev1.PodFailed).obj(), flat{"ns/failed", "n1", nil}},
		{"deployment at zero replicas, init containers included", makeDeployment("ns", "d", 0, []string{"migrate:1"}, "app:1"),
			flat{"ns/d", "", []string{"app:1", "migrate:1"}}},
		{"statefulset at zero", makeStatefulSet("ns", "s", 0, "db:5"), flat{"ns/s", "", []string{"db:5"}}},
		{"daemonset", makeDaemonSet("kube-system", "ds", "agent:3"), flat{"kube-system/ds", "", []string{"agent:3"}}},
		{"replicaset with replicas", makeReplicaSet("ns", "rs", 2, "app:2"), flat{"ns/rs", "", []string{"app:2"}}},
		{"replicaset at zero is history", makeReplicaSet("ns", "rs-old", 0, "app:1"), flat{"ns/rs-old", "", nil}},
		{"unfinished job", makeJob("ns", "j", "batch:1"), flat{"ns/j", "", []string{"batch:1"}}},
		{"complete job", finished(makeJob("ns", "j", "batch:1"), batchv1.JobComplete), flat{"ns/j", "", nil}},
		{"failed job", finished(makeJob("ns", "j", "batch:1"), batchv1.JobFailed), flat{"ns/j", "", nil}},
		{"job with a false Complete condition still counts", func() *batchv1.Job {
			j := finished(makeJob("ns", "j", "batch:1"), batchv1.JobComplete)
			j.Status.Conditions[0].Status = corev1.ConditionFalse
			return j
		}(), flat{"ns/j", "", []string{"batch:1"}}},
		{"cronjob", makeCronJob("ns", "backup", false, "backup:1"), flat{"ns/backup", "", []string{"backup:1"}}},
		{"suspended cronjob", makeCronJob("ns", "backup", true, "backup:1"), flat{"ns/backup", "", []string{"backup:1"}}},
		{"pod's image volumes beside its containers, other volumes ignored", makePod("ns", "p").node("n1").containers("app:1").volumes("example.com/data:1", "", "example.com/model@sha256:0000000000000000000000000000000000000000000000000000000000000002").obj(),
			flat{"ns/p", "n1", []string{"app:1", "example.com/data:1", "example.com/model@sha256:0000000000000000000000000000000000000000000000000000000000000002"}}},
		{"image volume without a reference", makePod("ns", "p").node("n1").containers("app:1").volumes("").obj(), flat{"ns/p", "n1", []string{"app:1"}}},
		{"running pod: the image each image volume mounts", makePod("ns", "p").node("n1").containers("app:1").volumes("example.com/data:1").phase(corev1.PodRunning).
			mountStatus("example.com/data@sha256:0000000000000000000000000000000000000000000000000000000000000003").obj(),
			flat{"ns/p", "n1", []string{"app:1", "example.com/data:1", "example.com/data@sha256:0000000000000000000000000000000000000000000000000000000000000003"}}},
		{"finished pod's image volume does not count", makePod("ns", "done").node("n1").containers("app").volumes("example.com/data:1").phase(corev1.PodSucceeded).obj(), flat{"ns/done", "n1", nil}},
		{"deployment's image volume", withVolumes(makeDeployment("ns", "d", 0, []string{"migrate:1"}, "app:1"), "example.com/data:1"),
			flat{"ns/d", "", []string{"app:1", "example.com/data:1", "migrate:1"}}},
		{"statefulset's image volume", withVolumes(makeStatefulSet("ns", "s", 1, "db:5"), "example.com/data:1", ""), flat{"ns/s", "", []string{"db:5", "example.com/data:1"}}},
		{"daemonset's image volume", withVolumes(makeDaemonSet("ns", "ds", "agent:3"), "example.com/data:1"), flat{"ns/ds", "", []string{"agent:3", "example.com/data:1"}}},
		{"replicaset's image volume", withVolumes(makeReplicaSet("ns", "rs", 2, "app:2"), "example.com/data:1"), flat{"ns/rs", "", []string{"app:2", "example.com/data:1"}}},
		{"replicaset at zero: its image volume is history too", withVolumes(makeReplicaSet("ns", "rs", 0, "app:2"), "example.com/data:1"), flat{"ns/rs", "", nil}},
		{"job's image volume", withVolumes(makeJob("ns", "j", "batch:1"), "example.com/data:1"), flat{"ns/j", "", []string{"batch:1", "example.com/data:1"}}},
		{"complete job's image volume does not count", finished(withVolumes(makeJob("ns", "j", "batch:1"), "example.com/data:1"), batchv1.JobComplete), flat{"ns/j", "", nil}},
		{"cronjob's image volume", withVolumes(makeCronJob("ns", "c", true, "backup:1"), "example.com/data:1"), flat{"ns/c", "", []string{"backup:1", "example.com/data:1"}}},
		{"an image volume only", withVolumes(makeDeployment("ns", "d", 1, nil), "example.com/data:1"), flat{"ns/d", "", []string{"example.com/data:1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _, ok := toEntry(tc.obj)
			if !ok {
				t.Fatalf("toEntry(%T) not converted", tc.obj)
			}
			if diff := cmp.Diff(tc.want, flatten(e)); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
	if _, _, ok := toEntry(&corev1.ConfigMap{}); ok {
		t.Error("a ConfigMap was converted")
	}
}

// Pods of one ReplicaSet share one interned image list, whatever the order
// of their containers' images.
func TestEntriesShareImages(t *testing.T) {
	a, _, _ := toEntry(makePod("ns", "a").node("n1").containers("x", "y").obj())
	b, _, _ := toEntry(makePod("ns", "b").node("n2").containers("y", "x").obj())
	if a.images != b.images {
		t.Error("equal image lists are not one handle")
	}
}

func TestOwners(t *testing.T) {
	var refs []references.Ref
	for k := kindPod; k < numKinds; k++ {
		e, _, _ := toEntry(makePod("ns", "n").containers("img").obj())
		refs = appendRefs(refs, k, e.key, e.images)
	}
	var got []string
	for _, r := range refs {
		got = append(got, r.Owner)
	}
	want := []string{"Pod ns/n", "Deployment ns/n", "StatefulSet ns/n", "DaemonSet ns/n", "ReplicaSet ns/n", "Job ns/n", "CronJob ns/n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
}

// TestImagesOverTheBoundDropped: an image over imageref.MaxImageString, or
// holding a newline, is left out of the object's images and counted; the
// object's other images stay, and one at the bound is kept.
func TestImagesOverTheBoundDropped(t *testing.T) {
	atBound := "registry.example.com/" + strings.Repeat("a", imageref.MaxImageString-len("registry.example.com/"))
	huge := strings.Repeat("Zq", 614_411) // 1,228,822 bytes, as a tenant may write
	type got struct {
		Entry     flat
		TooLong   int
		Malformed int
		Longest   int
	}
	cases := map[string]struct {
		obj  any
		want got
	}{
		"a deployment at zero with a 1.2 MB image": {obj: makeDeployment("tenant-a", "big", 0, nil, huge, "nginx:1.27"),
			want: got{Entry: flat{"tenant-a/big", "", []string{"nginx:1.27"}}, TooLong: 1, Longest: len(huge)}},
		"only that image": {obj: makeDeployment("tenant-a", "big", 0, nil, huge),
			want: got{Entry: flat{"tenant-a/big", "", nil}, TooLong: 1, Longest: len(huge)}},
		"an image at the bound is kept": {obj: makeCronJob("ns", "c", false, atBound),
			want: got{Entry: flat{"ns/c", "", []string{atBound}}}},
		"a byte over the bound": {obj: makeCronJob("ns", "c", false, atBound+"a"),
			want: got{Entry: flat{"ns/c", "", nil}, TooLong: 1, Longest: len(atBound) + 1}},
		"a pod's spec and status": {obj: makePod("ns", "p").node("n1").containers(huge, "app:1").phase(corev1.PodRunning).status("c", huge, "sha256:1").obj(),
			want: got{Entry: flat{"ns/p", "n1", []string{"app:1", "sha256:1"}}, TooLong: 2, Longest: len(huge)}},
		"an image volume's reference": {obj: withVolumes(makeDaemonSet("tenant-a", "ds", "agent:3"), huge),
			want: got{Entry: flat{"tenant-a/ds", "", []string{"agent:3"}}, TooLong: 1, Longest: len(huge)}},
		"a newline": {obj: makeStatefulSet("ns", "s", 1, "db:5\nevil"),
			want: got{Entry: flat{"ns/s", "", nil}, Malformed: 1}},
		"a finished pod counts nothing, drops nothing": {obj: makePod("ns", "done").node("n1").containers(huge).phase(corev1.PodSucceeded).obj(),
			want: got{Entry: flat{"ns/done", "n1", nil}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, d, ok := toEntry(tc.obj)
			if !ok {
				t.Fatalf("toEntry(%T) not converted", tc.obj)
			}
			g := got{Entry: flatten(e), TooLong: d.tooLong, Malformed: d.malformed, Longest: d.longest}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDropsReportedOnce: an object is counted once for what it drops,
// however often it is read (status updates, relists), and again when what
// it drops changes; warnings past the burst are suppressed, never the
// count.
func TestDropsReportedOnce(t *testing.T) {
	huge := strings.Repeat("x", imageref.MaxImageString+1)
	r := newDropReporter(logr.Discard())
	rec := record.NewFakeRecorder(100)
	r.recorder = rec
	// A clock that does not move: the bucket refills by none.
	r.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(warnQPS, warnBurst, clocktesting.NewFakeClock(time.Unix(0, 0)))
	before := metrics.InputsDroppedCount(metrics.SourceWorkloadImage, metrics.ReasonTooLong)
	read := func(obj any) {
		_, d, _ := toEntry(obj)
		r.report(d)
	}
	dep := makeDeployment("tenant-a", "big", 0, nil, huge)
	dep.UID = "u1"
	for range 5 {
		read(dep)
	}
	dep2 := dep.DeepCopy()
	dep2.Spec.Template.Spec.Containers = append(dep2.Spec.Template.Spec.Containers, corev1.Container{Name: "b", Image: huge + "y"})
	read(dep2)
	for n := range 2 * warnBurst {
		d := makeDeployment("tenant-b", fmt.Sprintf("d-%d", n), 0, nil, huge)
		d.UID = types.UID(fmt.Sprint("v", n))
		read(d)
	}
	got := map[string]int{
		"counted": int(metrics.InputsDroppedCount(metrics.SourceWorkloadImage, metrics.ReasonTooLong) - before),
		"events":  len(rec.Events),
	}
	// dep: 1, dep2: 2 (its two images), 20 others: 1 each.
	want := map[string]int{"counted": 1 + 2 + 2*warnBurst, "events": warnBurst}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ev := <-rec.Events; !strings.Contains(ev, eraserv1.ReasonImageDropped) || !strings.Contains(ev, "over 4096 bytes") {
		t.Errorf("event %q", ev)
	}
}
