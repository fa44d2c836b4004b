// Package runnow is what the ImageList and schedule controllers share to
// honour the eraser.sh/run-now annotation: whether an object carries it,
// which job a request gets, and whether it may start.
//
// A request is identified by the resourceVersion of the annotated object as
// the controller read it, and its job is named after that. A controller
// that reads the same request twice (a stale cache, or a restart between
// creating the job and removing the annotation) computes the same job name
// and finds the job instead of starting a second one; a request made again
// later changes the resourceVersion and is a new request.
package runnow

import (
	"crypto/sha256"
	"encoding/hex"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// Requested says whether obj carries the annotation.
func Requested(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[eraserv1.AnnotationRunNow]
	return ok
}

// Predicate lets through the events of objects that carry the annotation,
// for watches that otherwise ignore metadata-only changes.
func Predicate() predicate.Predicate {
	return predicate.NewPredicateFuncs(Requested)
}

// RequestID is a short, name-safe identity of the request obj carries.
func RequestID(obj client.Object) string {
	sum := sha256.Sum256([]byte(obj.GetResourceVersion()))
	return hex.EncodeToString(sum[:4])
}

// Action is what a request gets.
type Action int

const (
	// Start the request's job.
	Start Action = iota
	// Started: the request's job exists already; only the annotation is
	// left to remove.
	Started
	// Refuse: another job of the same kind is running.
	Refuse
)

func (a Action) String() string {
	return [...]string{"Start", "Started", "Refuse"}[a]
}

// Decision is what to do with a request and the job it is about: its own job
// (Started) or the one that is running (Refuse).
type Decision struct {
	Action Action
	Job    string
}

// Decide judges a request whose job would be named job, among the jobs of
// the same kind that exist. The request's own job counts first, whatever
// its phase: having finished does not make it due again.
func Decide(job string, jobs []eraserv1.ImageJob) Decision {
	running := ""
	for i := range jobs {
		j := &jobs[i]
		if j.Name == job {
			return Decision{Action: Started, Job: job}
		}
		if Running(j) && running == "" {
			running = j.Name
		}
	}
	if running != "" {
		return Decision{Action: Refuse, Job: running}
	}
	return Decision{Action: Start, Job: job}
}

// Running says whether a job is still going: created and not yet finished.
func Running(job *eraserv1.ImageJob) bool {
	return job.Status.Phase == "" || job.Status.Phase == eraserv1.PhaseRunning
}
