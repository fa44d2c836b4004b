package holdback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/migration"
)

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

// otherManagers holds back a manager while another Eraser manager acts on
// the same CRDs: it says who and what to do, on the EraserConfig ConfigMap
// too, and looks again until the others are gone (or scaled to 0).
type otherManagers struct {
	log    logr.Logger
	reader client.Reader
	key    client.ObjectKey

	mu     sync.Mutex
	others []migration.Manager
}

var errOthersGone = errors.New("no other Eraser manager acts on the CRDs any more")

// Name is the readiness check's.
func (g *otherManagers) Name() string { return "other-managers" }

// Message says who the others are and what to do.
func (g *otherManagers) Message() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	parts := make([]string, len(g.others))
	for i, m := range g.others {
		parts[i] = fmt.Sprintf("Deployment %s/%s runs %s", m.Namespace, m.Name, migration.OtherManagerAdvice(m))
	}
	return "no job runs and nothing is removed while another Eraser manager acts on the eraser.sh CRDs: " + strings.Join(parts, "; ")
}

// Report logs the message and files it on the ConfigMap.
func (g *otherManagers) Report(ctx context.Context, events record.EventRecorder) {
	msg := g.Message()
	g.mu.Lock()
	n := len(g.others)
	g.mu.Unlock()
	g.log.Error(nil, msg, "others", n)
	cm := &corev1.ConfigMap{}
	if err := g.reader.Get(ctx, g.key, cm); err == nil {
		events.Event(cm, corev1.EventTypeWarning, eraserv1.ReasonOtherManager, msg)
	}
}

// Recheck lists the Deployments: gone once no other manager is among
// them, changed when the others are not the same.
func (g *otherManagers) Recheck(ctx context.Context) (gone, changed bool, err error) {
	var list appsv1.DeploymentList
	if err := g.reader.List(ctx, &list); err != nil {
		return false, false, fmt.Errorf("listing Deployments again: %w", err)
	}
	others := migration.Others(g.key.Namespace, list.Items)
	metrics.SetOtherManagers(len(others))
	if len(others) == 0 {
		g.log.Info(errOthersGone.Error() + "; exiting, so that the restarted manager runs its controllers")
		return true, false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	changed = !slices.Equal(others, g.others)
	g.others = others
	return false, changed, nil
}
