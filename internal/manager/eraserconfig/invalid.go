package eraserconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// RecheckEvery is how often a manager held back by its configuration
// reads its ConfigMap again.
const RecheckEvery = 10 * time.Second

// Invalid is what holds back a manager whose EraserConfig is invalid and
// that has no good one to fall back on (LoadLastGood): instead of exiting
// into a crash loop, it runs no controller, so removes nothing; it stays
// live and fails readiness with the error (the rollout stops there, and the
// pod's Ready condition says why), files a Warning Event on the ConfigMap,
// and reads the ConfigMap again until its document is valid. Then the
// process exits to be restarted with it. It is a holdback.Cause.
type Invalid struct {
	log    logr.Logger
	reader client.Reader
	key    client.ObjectKey
	// dataKey is the document's key in the ConfigMap.
	dataKey string

	mu  sync.Mutex
	err error
}

// NewInvalid is the cause of a manager held back by err, the error of the
// document under dataKey in the ConfigMap at key.
func NewInvalid(log logr.Logger, r client.Reader, key client.ObjectKey, dataKey string, err error) *Invalid {
	return &Invalid{log: log, reader: r, key: key, dataKey: dataKey, err: err}
}

var errConfigFixed = errors.New("the EraserConfig ConfigMap now holds a valid document")

// Name is the readiness check's.
func (g *Invalid) Name() string { return "config-invalid" }

// Message says what is wrong and what to do.
func (g *Invalid) Message() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("no job runs and nothing is removed: %v; fix ConfigMap %s/%s (kubectl eraser config check -f FILE checks a document first)",
		g.err, g.key.Namespace, g.key.Name)
}

// Report logs the error and files it on the ConfigMap.
func (g *Invalid) Report(ctx context.Context, events record.EventRecorder) {
	msg := g.Message()
	g.log.Error(nil, msg, "configMap", g.key.String())
	cm := &corev1.ConfigMap{}
	if err := g.reader.Get(ctx, g.key, cm); err == nil {
		events.Event(cm, corev1.EventTypeWarning, eraserv1.ReasonInvalidConfig, msg)
	}
}

// Recheck reads the ConfigMap: gone once its document is valid, changed
// when its error is another.
func (g *Invalid) Recheck(ctx context.Context) (gone, changed bool, err error) {
	cm := &corev1.ConfigMap{}
	if err := g.reader.Get(ctx, g.key, cm); err != nil {
		return false, false, fmt.Errorf("reading the EraserConfig ConfigMap again: %w", err)
	}
	_, _, perr := config.Parse([]byte(cm.Data[g.dataKey]))
	if perr == nil {
		g.log.Info(errConfigFixed.Error() + "; exiting, so that the restarted manager runs with it")
		return true, false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	changed = perr.Error() != g.err.Error()
	g.err = perr
	return false, changed, nil
}
