package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/migration"
)

// ReasonOtherManager is the Event reason on the EraserConfig ConfigMap of
// a manager held back by another Eraser manager.
const ReasonOtherManager = "OtherEraserManager"

// otherManagersRecheckInterval is how often a manager held back by
// another one looks again.
var otherManagersRecheckInterval = 30 * time.Second

// readOtherManagers finds the Eraser managers of other namespaces that
// act on the same eraser.sh objects (package migration says which
// Deployments those are): upstream's, the AKS Image Cleaner add-on, or
// another install of this chart. Two managers would both run the
// ImageLists, and upstream's deletes every ImageJob at its start. A
// manager that may not list Deployments goes on unchecked, saying so.
func readOtherManagers(ctx context.Context, log logr.Logger, r client.Reader, namespace string) []migration.Manager {
	var list appsv1.DeploymentList
	if err := r.List(ctx, &list); err != nil {
		log.Error(err, "cannot check for other Eraser managers acting on the same CRDs; going on unchecked",
			"needs", "list on deployments in every namespace", "forbidden", apierrors.IsForbidden(err))
		return nil
	}
	others := migration.Others(namespace, list.Items)
	metrics.SetOtherManagers(len(others))
	return others
}

// managerGate holds back a manager while another Eraser manager acts on
// the same CRDs: it fails readiness with the reason and what to do, files
// a Warning Event on the EraserConfig ConfigMap, and looks again until the
// others are gone (or scaled to 0), then ends the manager
// (errOthersGone) so that it restarts with its controllers.
type managerGate struct {
	log      logr.Logger
	reader   client.Reader
	recorder record.EventRecorder
	key      client.ObjectKey

	mu     sync.Mutex
	others []migration.Manager
}

var errOthersGone = errors.New("no other Eraser manager acts on the CRDs any more")

func newManagerGate(ctx context.Context, log logr.Logger, r client.Reader, recorder record.EventRecorder, key client.ObjectKey, others []migration.Manager) *managerGate {
	g := &managerGate{log: log, reader: r, recorder: recorder, key: key}
	g.report(ctx, others)
	return g
}

// message says who the others are and what to do.
func (g *managerGate) message() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	parts := make([]string, len(g.others))
	for i, m := range g.others {
		parts[i] = fmt.Sprintf("Deployment %s/%s runs %s", m.Namespace, m.Name, migration.OtherManagerAdvice(m))
	}
	return "no job runs and nothing is removed while another Eraser manager acts on the eraser.sh CRDs: " + strings.Join(parts, "; ")
}

func (g *managerGate) report(ctx context.Context, others []migration.Manager) {
	g.mu.Lock()
	g.others = others
	g.mu.Unlock()
	msg := g.message()
	g.log.Error(nil, msg, "others", len(others))
	cm := &corev1.ConfigMap{}
	if err := g.reader.Get(ctx, g.key, cm); err == nil {
		g.recorder.Event(cm, corev1.EventTypeWarning, ReasonOtherManager, msg)
	}
}

// Ready fails with the message while the gate holds the manager back.
func (g *managerGate) Ready(*http.Request) error { return errors.New(g.message()) }

// Start looks for the others every otherManagersRecheckInterval, says
// again who they are when that changes, and returns errOthersGone once
// there are none.
func (g *managerGate) Start(ctx context.Context) error {
	t := time.NewTicker(otherManagersRecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var list appsv1.DeploymentList
		if err := g.reader.List(ctx, &list); err != nil {
			g.log.V(1).Info("listing Deployments again", "error", err.Error())
			continue
		}
		others := migration.Others(g.key.Namespace, list.Items)
		metrics.SetOtherManagers(len(others))
		if len(others) == 0 {
			g.log.Info(errOthersGone.Error() + "; exiting, so that the restarted manager runs its controllers")
			return errOthersGone
		}
		g.mu.Lock()
		changed := !slices.Equal(others, g.others)
		g.mu.Unlock()
		if changed {
			g.report(ctx, others)
		}
	}
}

// NeedLeaderElection is false: every replica is held back, and says so.
func (g *managerGate) NeedLeaderElection() bool { return false }

// Name is the readiness check's.
func (g *managerGate) Name() string { return "other-managers" }
