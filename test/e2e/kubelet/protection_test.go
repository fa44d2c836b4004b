//go:build linux

package kubelet

// TestWorkloadProtection: on a real containerd node, the images
// the cluster will ask for again, and the one no registry can give back,
// are kept by "*" and by a scheduled run with their reasons in the report
// and the job's totals; a Deployment scaled up again starts without a pull;
// an ImageList naming them removes them all the same.
//
// Four images on the first node, each its own small image:
//   - deploy: a Deployment's, pulled by the kubelet while it ran at one
//     replica, then scaled to 0 (no pod, the template alone references it);
//   - cron: a suspended CronJob's, pulled by a pod that finished and was
//     deleted (the CronJob alone references it);
//   - main: the main container's of a pod bound to the node whose init
//     container blocks, pulled beforehand by the same finished pod;
//   - imported: imported with ctr images import (no repository digest), as
//     on an air-gapped node.
//
// The blocking pod's init container image (initImg) runs: it is in use, and
// stays even when an ImageList names it.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// protNS holds the test's own workloads.
const protNS = "e2e-protection"

// The test's workload names, as the report's details name them.
const (
	protDeploy  = "prot-deploy"
	protCron    = "prot-cron"
	protBlocked = "prot-blocked"
	protPrepull = "prot-prepull"
)

// protected is what the test set up on its node.
type protected struct {
	node                                  Node
	deploy, cron, main, initImg, imported string
	// ids are the images' IDs on the node, by tag: the report names an
	// image by its ID whatever tag it lists first.
	ids map[string]string
}

// keepReportConfig keeps each job's report for the checks (the test deletes
// the jobs), with a minimum age that lets "*" take anything unprotected.
func keepReportConfig(config string) string {
	return withRetention(strings.Replace(config, "keepReportFor: 0s", "keepReportFor: 1h", 1), removable)
}

func TestWorkloadProtection(t *testing.T) {
	requireCluster(t)
	start := time.Now()
	objects := installChart(t)
	t.Logf("installed in %.1fs", time.Since(start).Seconds())
	createExclusionList(t)
	w := setUpProtected(t)
	// What the automatic policies must keep on the node, and why.
	want := map[string]kept{
		w.deploy:   {"referenced", "referenced by Deployment " + protNS + "/" + protDeploy},
		w.cron:     {"referenced", "referenced by CronJob " + protNS + "/" + protCron},
		w.main:     {"referenced", "pod " + protNS + "/" + protBlocked + " on this node"},
		w.imported: {"not re-pullable", "no repository digest"},
	}

	t.Run("PruneAllKeepsThemWithTheirReasons", func(t *testing.T) {
		setConfig(t, keepReportConfig(baseConfig))
		t.Cleanup(func() { setConfig(t, baseConfig) })
		il := runImageList(t, "prot-all", eraserv1.PruneAll)
		job := jobWithReport(t, il.Status.Job)
		withInUse := map[string]kept{w.initImg: {"in use", ""}}
		for k, v := range want {
			withInUse[k] = v
		}
		checkKept(t, w, job, withInUse)
		checkTotals(t, job, il.Status.Results)
		expectImages(t, w.node, w.tags(), nil)
		// kubectl eraser report shows the reasons as the report has them.
		out := kubectlEraser(t, "report", "imagelist/prot-all", "--node", w.node.Name)
		for _, k := range want {
			if !strings.Contains(out, k.outcome) || !strings.Contains(out, k.detail) {
				t.Errorf("kubectl eraser report lacks %q (%s):\n%s", k.outcome, k.detail, out)
			}
		}
		deleteJobs(t)
	})

	t.Run("ScheduledRunKeepsThemWithTheirReasons", func(t *testing.T) {
		setConfig(t, keepReportConfig(scheduledConfig))
		t.Cleanup(func() { stopScheduledRuns(t) })
		job := jobWithReport(t, finishedScheduledJob(t, false).Name)
		// The collector hands on only what no container uses: the init
		// container's image is not the remover's to judge.
		checkKept(t, w, job, want)
		checkTotals(t, job, nil)
		expectImages(t, w.node, w.tags(), nil)
	})

	t.Run("ScaledUpDeploymentStartsWithoutAPull", func(t *testing.T) {
		scaleDeployment(t, 1)
		pod := deploymentPod(t)
		events := func() []corev1.Event {
			list, err := clientset.CoreV1().Events(protNS).List(testCtx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
			if err != nil {
				t.Fatal(err)
			}
			return list.Items
		}
		// The kubelet posts Pulled (or Pulling, when it must pull) before
		// the container starts, so once the pod runs it is on its way.
		eventually(t, time.Minute, "the kubelet's image event for pod "+pod, func() (bool, string) {
			for _, e := range events() {
				if e.Reason == "Pulled" || e.Reason == "Pulling" {
					return true, ""
				}
			}
			return false, "no Pulled or Pulling event yet"
		})
		present := false
		for _, e := range events() {
			switch {
			case e.Reason == "Pulling":
				t.Errorf("the kubelet pulled the Deployment's image again: %s", e.Message)
			case e.Reason == "Pulled" && strings.Contains(e.Message, "already present on machine"):
				present = true
			case e.Reason == "Pulled":
				t.Errorf("the kubelet pulled the Deployment's image: %s", e.Message)
			}
		}
		if !present {
			t.Errorf("no Pulled event saying %s is already present on the node", w.deploy)
		}
		// Back to 0, so that nothing uses it when the ImageList names it.
		scaleDeployment(t, 0)
	})

	t.Run("ImageListNamingThemRemovesThem", func(t *testing.T) {
		setConfig(t, keepReportConfig(baseConfig))
		t.Cleanup(func() { setConfig(t, baseConfig) })
		il := runImageList(t, "prot-named", w.deploy, w.cron, w.main, w.imported, w.initImg)
		job := jobWithReport(t, il.Status.Job)
		checkKept(t, w, job, map[string]kept{
			w.deploy: {"removed", ""}, w.cron: {"removed", ""}, w.main: {"removed", ""}, w.imported: {"removed", ""},
			w.initImg: {"in use", ""},
		})
		expectImages(t, w.node, []string{w.initImg}, []string{w.deploy, w.cron, w.main, w.imported})
		deleteJobs(t)
	})

	t.Run("UninstallLeavesNothingBehind", func(t *testing.T) {
		uninstall(t, objects)
	})
}

// tags are the test's images on its node.
func (w *protected) tags() []string {
	return []string{w.deploy, w.cron, w.main, w.initImg, w.imported}
}

// setUpProtected creates the test's namespace, images and workloads on the
// first node (see the top of this file) and removes them when the test
// ends.
func setUpProtected(t *testing.T) *protected {
	t.Helper()
	ctx := testCtx(t)
	start := time.Now()
	w := &protected{node: cluster.Nodes[0], deploy: crioImage(protDeploy), cron: crioImage(protCron),
		main: crioImage("prot-main"), initImg: crioImage("prot-init"), imported: testImage("prot-imported")}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: protNS}}
	if err := kube.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", protNS, err)
	}
	t.Cleanup(func() { cleanUpProtected(t, w, ns) })
	// Pods are admitted once the controller manager made the namespace's
	// default ServiceAccount.
	eventually(t, time.Minute, "the default ServiceAccount of "+protNS, func() (bool, string) {
		err := kube.Get(ctx, client.ObjectKey{Namespace: protNS, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, fmt.Sprintf("get: %v", err)
	})

	pulled := seedImages(t, w.deploy, w.cron, w.main, w.initImg)
	pushImages(t, pulled...)
	importUnpulled(t, []Node{w.node}, seedImages(t, w.imported))

	// The Deployment's image arrives as a workload's does: pulled by the
	// kubelet for its pod.
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: protDeploy, Namespace: protNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": protDeploy}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": protDeploy}},
				Spec:       protPodSpec(w.node.Name, corev1.Container{Name: "main", Image: w.deploy}),
			},
		},
	}
	create(t, dep)
	deploymentPod(t)
	scaleDeployment(t, 0)

	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: protCron, Namespace: protNS},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 0 1 1 *",
			Suspend:  ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: protPodSpec("", corev1.Container{Name: "main", Image: w.cron}),
			}}},
		},
	}
	// A Job's pods may not restart Always.
	cron.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	create(t, cron)

	// A pod pulls the CronJob's and the blocked pod's main images and
	// finishes (its containers' command is not in the images, so each fails
	// to start once its image is pulled), and is deleted, as a finished
	// Job's pod is: while it exists, its dead containers keep their images
	// in use.
	prepull := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: protPrepull, Namespace: protNS},
		Spec: protPodSpec(w.node.Name,
			corev1.Container{Name: "prepull-cron", Image: w.cron, Command: []string{"/not-in-the-image"}},
			corev1.Container{Name: "prepull-main", Image: w.main, Command: []string{"/not-in-the-image"}})}
	prepull.Spec.RestartPolicy = corev1.RestartPolicyNever
	create(t, prepull)
	eventually(t, 2*time.Minute, "pod "+protPrepull+" to finish", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(prepull), prepull); err != nil {
			return false, err.Error()
		}
		p := prepull.Status.Phase
		return p == corev1.PodFailed || p == corev1.PodSucceeded, fmt.Sprintf("phase %s", p)
	})
	if err := kube.Delete(ctx, prepull); err != nil {
		t.Fatalf("deleting pod %s: %v", protPrepull, err)
	}
	eventually(t, 2*time.Minute, "the containers of pod "+protPrepull+" to be gone from "+w.node.Name, func() (bool, string) {
		var left []string
		for _, c := range nodeContainers(t, w.node) {
			if strings.HasPrefix(c.Name, "prepull-") {
				left = append(left, c.Name+" "+c.State)
			}
		}
		err := kube.Get(ctx, client.ObjectKeyFromObject(prepull), &corev1.Pod{})
		return len(left) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("containers %v, get pod: %v", left, err)
	})

	blocked := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: protBlocked, Namespace: protNS},
		Spec: protPodSpec(w.node.Name, corev1.Container{Name: "main", Image: w.main})}
	// pause runs until it is signalled: the init container never ends.
	blocked.Spec.InitContainers = []corev1.Container{{Name: "init", Image: w.initImg, ImagePullPolicy: corev1.PullIfNotPresent}}
	create(t, blocked)
	eventually(t, 2*time.Minute, "the init container of pod "+protBlocked+" to run", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(blocked), blocked); err != nil {
			return false, err.Error()
		}
		s := blocked.Status.InitContainerStatuses
		return len(s) == 1 && s[0].State.Running != nil, fmt.Sprintf("phase %s, init %+v", blocked.Status.Phase, s)
	})

	// The set-up is what the test says: every image on the node, the
	// pulled ones with a repository digest, the imported one without.
	imgs, err := criClient(t, w.node).ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.ids = map[string]string{}
	for _, img := range imgs {
		for _, tag := range img.Tags {
			if !slices.Contains(w.tags(), tag) {
				continue
			}
			w.ids[tag] = img.ID
			if (len(img.Digests) == 0) != (tag == w.imported) {
				t.Fatalf("%s on %s: repository digests %v; want none only for the imported image", tag, w.node.Name, img.Digests)
			}
		}
	}
	for _, tag := range w.tags() {
		if w.ids[tag] == "" {
			t.Fatalf("%s is not on %s after the set-up", tag, w.node.Name)
		}
	}
	t.Logf("workloads and images set up on %s in %.1fs", w.node.Name, time.Since(start).Seconds())
	return w
}

// protPodSpec runs the containers on the node ("" leaves it to the
// scheduler), pulling only what is not there.
func protPodSpec(node string, containers ...corev1.Container) corev1.PodSpec {
	for i := range containers {
		containers[i].ImagePullPolicy = corev1.PullIfNotPresent
	}
	return corev1.PodSpec{
		NodeName:                      node,
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](2),
		RestartPolicy:                 corev1.RestartPolicyAlways,
		Containers:                    containers,
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := kube.Create(testCtx(t), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// cleanUpProtected deletes the namespace and whatever of the test's images
// the runs left on the node.
func cleanUpProtected(t *testing.T, w *protected, ns *corev1.Namespace) {
	ctx := context.Background()
	start := time.Now()
	if err := kube.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s: %v", protNS, err)
	}
	eventually(t, 3*time.Minute, "namespace "+protNS+" to be gone", func() (bool, string) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	t.Logf("namespace %s deleted in %.1fs", protNS, time.Since(start).Seconds())
	removeImages(t, w.node, w.tags()...)
}

// scaleDeployment sets the Deployment's replicas and waits until it has
// that many pods, running (or, at 0, none left at all).
func scaleDeployment(t *testing.T, replicas int32) {
	t.Helper()
	ctx := testCtx(t)
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: protDeploy, Namespace: protNS}}
	if err := kube.Patch(ctx, dep, patch); err != nil {
		t.Fatalf("scaling %s to %d: %v", protDeploy, replicas, err)
	}
	eventually(t, 2*time.Minute, fmt.Sprintf("%s to have %d running pods", protDeploy, replicas), func() (bool, string) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace(protNS), client.MatchingLabels{"app": protDeploy}); err != nil {
			return false, err.Error()
		}
		var states []string
		running := int32(0)
		for _, p := range pods.Items {
			states = append(states, fmt.Sprintf("%s %s deleting=%v", p.Name, p.Status.Phase, p.DeletionTimestamp != nil))
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		// At 0 a terminating pod still runs the image: wait until it is gone.
		return running == replicas && (replicas > 0 || len(pods.Items) == 0), strings.Join(states, ", ")
	})
}

// deploymentPod waits for the Deployment's pod to run and returns its name.
func deploymentPod(t *testing.T) string {
	t.Helper()
	var name string
	eventually(t, 2*time.Minute, "a running pod of "+protDeploy, func() (bool, string) {
		var pods corev1.PodList
		if err := kube.List(testCtx(t), &pods, client.InNamespace(protNS), client.MatchingLabels{"app": protDeploy}); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				name = p.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods, none running", len(pods.Items))
	})
	return name
}
