package holdback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/crdcheck"
)

// crdReadTimeout is how long the start waits for an answer from the API
// server about the CRDs.
const crdReadTimeout = time.Minute

// readCRDs asks the API server for the CRDs until it answers, for up to
// crdReadTimeout; a CRD not there yet is waited for as long, as when the
// manager's manifest and its CRDs are applied together. A manager whose
// role may not read them (a role from another release) goes on unchecked,
// saying so: that is no reason to stop a manager that worked before the
// check existed.
func readCRDs(ctx context.Context, log logr.Logger, r client.Reader) ([]crdcheck.Finding, error) {
	deadline, cancel := context.WithTimeout(ctx, crdReadTimeout)
	defer cancel()
	delay := time.Second
	for {
		findings, err := crdcheck.Check(deadline, r, crdcheck.Needs())
		switch {
		case err == nil && !slices.ContainsFunc(findings, notInstalled):
			return findings, nil
		case apierrors.IsForbidden(err):
			log.Error(err, "cannot check that the installed CRDs keep the fields the manager writes; going on unchecked",
				"needs", "get on customresourcedefinitions imagelists.eraser.sh and imagejobs.eraser.sh")
			return nil, nil
		}
		select {
		case <-deadline.Done():
			if err == nil && ctx.Err() == nil {
				return findings, nil // still not installed: held back, and read again
			}
			return nil, fmt.Errorf("checking the installed CRDs: %w", errors.Join(err, ctx.Err()))
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

func notInstalled(f crdcheck.Finding) bool { return f.Object == nil }

// crds holds back a manager whose CRDs lack fields: it says what to run,
// and reads the CRDs again until they keep every field.
type crds struct {
	log       logr.Logger
	reader    client.Reader
	namespace string

	mu       sync.Mutex
	findings []crdcheck.Finding
}

var errCRDsFixed = errors.New("the installed CRDs now keep every field the manager writes")

// Name is the readiness check's.
func (g *crds) Name() string { return "crds" }

// Message says what the CRDs lack and what to run.
func (g *crds) Message() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return crdcheck.Message(g.findings, g.namespace)
}

// Report says what the findings are: a log line at error and a Warning
// Event on each CRD there is. The Event is filed on the CRD because the
// CRD is what has to change, and it is there whatever installed the
// manager; the API server keeps Events on cluster-scoped objects in
// namespace default.
func (g *crds) Report(_ context.Context, events record.EventRecorder) {
	g.mu.Lock()
	findings := g.findings
	g.mu.Unlock()
	g.log.Error(nil, crdcheck.Message(findings, g.namespace), "crds", names(findings))
	for _, f := range findings {
		if f.Object != nil {
			events.Event(f.Object, corev1.EventTypeWarning, eraserv1.ReasonMissingFields, f.String()+"; "+crdcheck.Remedy(g.namespace))
		}
	}
}

func names(findings []crdcheck.Finding) []string {
	out := make([]string, len(findings))
	for i, f := range findings {
		out[i] = f.Name
	}
	return out
}

// Recheck reads the CRDs: gone once they lack nothing, changed when what
// they lack is another.
func (g *crds) Recheck(ctx context.Context) (gone, changed bool, err error) {
	findings, err := crdcheck.Check(ctx, g.reader, crdcheck.Needs())
	if err != nil {
		return false, false, fmt.Errorf("reading the installed CRDs again: %w", err)
	}
	if len(findings) == 0 {
		g.log.Info(errCRDsFixed.Error() + "; exiting, so that the restarted manager runs its controllers")
		return true, false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	changed = !slices.EqualFunc(findings, g.findings, func(a, b crdcheck.Finding) bool {
		return a.String() == b.String()
	})
	g.findings = findings
	return false, changed, nil
}
