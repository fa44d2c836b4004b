package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/crdcheck"
)

// How long the start waits for an answer from the API server about the
// CRDs, and how often a manager held back by them reads them again.
var (
	crdReadTimeout     = time.Minute
	crdRecheckInterval = 30 * time.Second
)

// ReasonMissingFields is the Event reason on a CRD that lacks fields.
const ReasonMissingFields = "MissingFields"

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

// crdGate holds back a manager whose CRDs lack fields: it fails readiness
// with what to run, and reads the CRDs again until they keep every field,
// then ends the manager (errCRDsFixed) so that it restarts with its
// controllers.
type crdGate struct {
	log       logr.Logger
	reader    client.Reader
	recorder  record.EventRecorder
	namespace string

	mu       sync.Mutex
	findings []crdcheck.Finding
}

var errCRDsFixed = errors.New("the installed CRDs now keep every field the manager writes")

func newCRDGate(log logr.Logger, r client.Reader, recorder record.EventRecorder, namespace string, findings []crdcheck.Finding) *crdGate {
	g := &crdGate{log: log, reader: r, recorder: recorder, namespace: namespace}
	g.report(findings)
	return g
}

// report says what the findings are: a log line at error and a Warning
// Event on each CRD there is. The Event is filed on the CRD because the
// CRD is what has to change, and it is there whatever installed the
// manager; the API server keeps Events on cluster-scoped objects in
// namespace default.
func (g *crdGate) report(findings []crdcheck.Finding) {
	g.mu.Lock()
	g.findings = findings
	g.mu.Unlock()
	msg := crdcheck.Message(findings, g.namespace)
	g.log.Error(nil, msg, "crds", names(findings))
	for _, f := range findings {
		if f.Object != nil {
			g.recorder.Event(f.Object, corev1.EventTypeWarning, ReasonMissingFields, f.String()+"; "+crdcheck.Remedy(g.namespace))
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

// Ready is the readiness check: failing, with the message, while the gate
// holds the manager back.
func (g *crdGate) Ready(*http.Request) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.New(crdcheck.Message(g.findings, g.namespace))
}

// Start reads the CRDs every crdRecheckInterval; it says again what they
// lack when that changes, and returns errCRDsFixed once they lack nothing.
func (g *crdGate) Start(ctx context.Context) error {
	t := time.NewTicker(crdRecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		findings, err := crdcheck.Check(ctx, g.reader, crdcheck.Needs())
		if err != nil {
			g.log.V(1).Info("reading the installed CRDs again", "error", err.Error())
			continue
		}
		if len(findings) == 0 {
			g.log.Info(errCRDsFixed.Error() + "; exiting, so that the restarted manager runs its controllers")
			return errCRDsFixed
		}
		g.mu.Lock()
		changed := !slices.EqualFunc(findings, g.findings, func(a, b crdcheck.Finding) bool {
			return a.String() == b.String()
		})
		g.mu.Unlock()
		if changed {
			g.report(findings)
		}
	}
}

// NeedLeaderElection is false: every replica is held back, and says so.
func (g *crdGate) NeedLeaderElection() bool { return false }

// Name is the readiness check's.
func (g *crdGate) Name() string { return "crds" }
