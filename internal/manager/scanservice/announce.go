package scanservice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=pods,verbs=patch

// announcer tells the scanners of the runs already going where the scan
// service is now. A leader in a new pod serves at a new address; the
// scanners the previous leader started read the address from a file the
// kubelet projects from their pod's annotation, so rewriting that
// annotation (once per pod, once per change of leader) moves them.
type announcer struct {
	c   client.Client
	ns  string
	url string
	// fetch, if set, starts fetching a run's DB archive this leader may
	// not hold (scandb.Mirror.Archive): the scanners told the new address
	// then find it on its way.
	fetch func(repository, digest string)
	log   logr.Logger
	// retry is the wait after a pass that failed.
	retry time.Duration
}

// Start announces once, trying again until it succeeds or the leader
// steps down.
func (a *announcer) Start(ctx context.Context) error {
	for {
		err := a.announce(ctx)
		if err == nil {
			return nil
		}
		a.log.Error(err, "telling the running scanners the scan service's address; trying again", "in", a.retry.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(a.retry):
		}
	}
}

func (a *announcer) announce(ctx context.Context) error {
	var pods corev1.PodList
	if err := a.c.List(ctx, &pods, client.InNamespace(a.ns), client.HasLabels{podspec.LabelJob}); err != nil {
		return fmt.Errorf("listing the worker pods: %w", err)
	}
	if a.fetch != nil {
		for _, db := range archivesOf(pods.Items) {
			a.fetch(db[0], db[1])
		}
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, scanshare.AnnotationService, a.url))
	var errs []error
	told := 0
	for _, name := range toAnnounce(pods.Items, a.url) {
		err := a.c.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: name}}, patch)
		switch {
		case err == nil:
			told++
		case client.IgnoreNotFound(err) != nil:
			errs = append(errs, fmt.Errorf("pod %s: %w", name, err))
		}
	}
	if told > 0 {
		a.log.Info("told the running scanners the scan service's new address", "pods", told, "address", a.url)
	}
	return errors.Join(errs...)
}

// toAnnounce names the worker pods whose scanner may still ask the service
// and was told another address.
func toAnnounce(pods []corev1.Pod, url string) []string {
	var out []string
	for _, pod := range mayAsk(pods) {
		if at := pod.Annotations[scanshare.AnnotationService]; at != "" && at != url {
			out = append(out, pod.Name)
		}
	}
	return out
}

// archivesOf are the DB archives, [repository, digest], that the worker
// pods whose scanner may still ask for one were told of, each once.
func archivesOf(pods []corev1.Pod) [][2]string {
	var out [][2]string
	for _, pod := range mayAsk(pods) {
		repo, digest, ok := scanshare.ParseDBAnnotation(pod.Annotations[scanshare.AnnotationDB])
		if ok && !slices.Contains(out, [2]string{repo, digest}) {
			out = append(out, [2]string{repo, digest})
		}
	}
	return out
}

// mayAsk are the unfinished worker pods whose scanner has not ended,
// including those whose scanner has not started yet.
func mayAsk(pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		if pod := &pods[i]; !podspec.Finished(pod) && !scannerEnded(pod) {
			out = append(out, pod)
		}
	}
	return out
}

func scannerEnded(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == podspec.ScannerContainer {
			return c.State.Terminated != nil
		}
	}
	return false
}
