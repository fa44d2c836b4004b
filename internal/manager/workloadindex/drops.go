package workloadindex

import (
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// drop is what one object's conversion left out, and whose it is.
type drop struct {
	dropped
	kind kind
	meta *metav1.ObjectMeta
}

// Warnings are rate-limited across the cluster: anyone who may create a
// Deployment may create thousands, and each would otherwise be an Event
// and a log line. 10 at once, then one every 5 s; the metric counts every
// one.
const (
	warnBurst = 10
	warnQPS   = 0.2
)

// maxSeen bounds the objects remembered as reported: once full the memory
// starts again, and those objects are counted again when next read.
const maxSeen = 10_000

// dropReporter tells of images left out, once per object and drop: an
// object's status updates and the index's relists convert it again, and
// should not count it again.
type dropReporter struct {
	mu         sync.Mutex
	seen       map[string]dropped
	limiter    flowcontrol.RateLimiter
	recorder   record.EventRecorder // nil: no Events (tests)
	log        logr.Logger
	suppressed int
}

func newDropReporter(log logr.Logger) *dropReporter {
	return &dropReporter{seen: map[string]dropped{}, limiter: flowcontrol.NewTokenBucketRateLimiter(warnQPS, warnBurst), log: log}
}

// report counts, logs and tells the object of what d left out, the first
// time this object is seen with it.
func (r *dropReporter) report(d drop) {
	if !d.any() || r == nil {
		return
	}
	key := d.kind.String() + "/" + d.meta.Namespace + "/" + d.meta.Name + "/" + string(d.meta.UID)
	r.mu.Lock()
	if r.seen[key] == d.dropped {
		r.mu.Unlock()
		return
	}
	if len(r.seen) >= maxSeen {
		clear(r.seen)
	}
	r.seen[key] = d.dropped
	warn := r.limiter.TryAccept()
	suppressed := r.suppressed
	if warn {
		r.suppressed = 0
	} else {
		r.suppressed++
	}
	r.mu.Unlock()
	metrics.InputsDropped(metrics.SourceWorkloadImage, metrics.ReasonTooLong, d.tooLong)
	metrics.InputsDropped(metrics.SourceWorkloadImage, metrics.ReasonMalformed, d.malformed)
	if !warn {
		return
	}
	r.log.Info("images left out of the references: none can name an image a node holds", "kind", d.kind.String(),
		"namespace", d.meta.Namespace, "name", d.meta.Name, "tooLong", d.tooLong, "longestBytes", d.longest, "malformed", d.malformed,
		"maxBytes", imageref.MaxImageString, "warningsSuppressedBefore", suppressed)
	if r.recorder != nil {
		ref := &corev1.ObjectReference{Kind: d.kind.String(), APIVersion: d.kind.apiVersion(), Namespace: d.meta.Namespace, Name: d.meta.Name, UID: d.meta.UID}
		r.recorder.Eventf(ref, corev1.EventTypeWarning, eraserv1.ReasonImageDropped,
			"Eraser left %d image(s) of this object out of the images it protects: %d over %d bytes (the longest %d), %d with a newline; no image on a node can be named by them",
			d.tooLong+d.malformed, d.tooLong, imageref.MaxImageString, d.longest, d.malformed)
	}
}
