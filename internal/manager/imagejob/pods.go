// Worker pods: built per node from the job's data, created a bounded number
// at a time, and refusals of the API server told apart.

package imagejob

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// builder returns the function that builds one node's pod for the job.
// The node's references are read as its pod is built: the latest before
// the pod exists.
func (r *Reconciler) builder(job *eraserv1.ImageJob, data *jobdata.Data, refs waveRefs, db runDB) func(int, nodefilter.Target) (*corev1.Pod, error) {
	return func(index int, target nodefilter.Target) (*corev1.Pod, error) {
		var node string
		if refs.node != nil {
			node = references.EncodeNode(refs.node(target.Name))
		}
		pod, err := podspec.Build(podspec.Params{
			References: refs.parts, NodeReferences: node,
			Batch: index / cleanupBatch,
			Job:   job.Name, JobUID: job.UID, Kind: data.Kind, Node: target.Name, OS: target.OS,
			Namespace: r.opts.Namespace, Config: data.Config, ConfigMap: job.Name, ConfigKey: config.ConfigKey,
			Exclusions: data.Exclusions, LogLevel: r.opts.LogLevel, DryRun: data.DryRun, PullSecrets: r.opts.PullSecrets,
			ScanService: r.opts.ScanService, ScanDB: db.db, ScanDBUnavailable: db.unavailable,
		})
		if err == nil && refs.set != "" {
			// Which set's parts the pod mounts, where the cache shows it:
			// they are kept until no unfinished pod names it
			// (pruneReferences).
			pod.Labels[jobdata.LabelReferenceSet] = refs.set
		}
		return pod, err
	}
}

// createWorkers bounds the pod creations in flight: enough to fan out
// thousands of nodes in seconds without flooding the API server. The API
// server is the bottleneck (make bench-manager): 32 in flight made fan-out
// slower on 2 cores than 16, by contention.
const createWorkers = 16

// createPods builds and creates the pods of the targets at the indexes in
// parallel (built one at a time, so a 5,000-node wave is never in memory at
// once) and returns one error per index; an existing pod (from before a
// restart) counts as created.
func (r *Reconciler) createPods(ctx context.Context, targets []nodefilter.Target, create []int, build func(int, nodefilter.Target) (*corev1.Pod, error)) []error {
	errs := make([]error, len(create))
	parallel.For(createWorkers, len(create), func(k int) {
		pod, err := build(create[k], targets[create[k]])
		if err == nil {
			if err = r.client.Create(ctx, pod); err == nil {
				r.skew.observe(r.clock.Now(), pod.CreationTimestamp.Time)
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs[k] = fmt.Errorf("creating the pod for node %s: %w", targets[create[k]].Name, err)
		}
	})
	return errs
}

// refusedAll reports whether every creation failed and every failure is a
// refusal that retrying cannot change (admission, validation), with the
// first one's message.
func refusedAll(errs []error) (string, bool) {
	if len(errs) == 0 {
		return "", false
	}
	for _, err := range errs {
		if err == nil || !permanent(err) {
			return "", false
		}
	}
	return apiMessage(errs[0]), true
}

// permanent refusals: Pod Security and other admission (Forbidden), an
// invalid pod or a missing PriorityClass (Invalid, Forbidden), a missing
// namespace. A quota refusal is Forbidden too: a whole wave refused by a
// quota fails fast with the quota's message.
func permanent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// apiMessage is the API server's own message, without the node's name, so
// that one refusal of many nodes reads as one.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if d := st.Details; d != nil && d.Name != "" {
			return strings.Replace(st.Message, `"`+d.Name+`" `, "", 1)
		}
		return st.Message
	}
	return err.Error()
}
