package remover

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// presence is what the image listing taken after the removals says of one
// image.
type presence int

const (
	// presenceUnknown: the listing failed, so the runtime's answer stands.
	presenceUnknown presence = iota
	presenceGone
	presenceListed
)

func (p presence) String() string {
	return [...]string{"unknown", "gone", "listed"}[p]
}

// permanentCodes are the gRPC codes with which a runtime refuses a removal
// for good: gRPC's own rule for them is that the same request fails again
// until someone changes the system's state. Every other code may succeed on
// retry and fails the node: Unavailable and DeadlineExceeded (the runtime is
// down or overloaded), Canceled, ResourceExhausted, Aborted, Internal, and
// Unknown, which containerd and CRI-O answer for failures of their stores as
// well as for anything they do not classify. NotFound never gets here: an
// image already gone counts as removed (cri.Client).
var permanentCodes = map[codes.Code]bool{
	codes.InvalidArgument:    true,
	codes.FailedPrecondition: true,
	codes.PermissionDenied:   true,
	codes.Unimplemented:      true,
	codes.OutOfRange:         true,
	codes.AlreadyExists:      true,
}

// judgeRemoval decides the outcome of one removal the runtime was asked
// for, from its answer (err), whether the image is still listed once every
// removal was answered, and whether a container uses it then (only known
// for a listed image). An empty detail keeps the removal's own (its
// policy's reason).
//
// What the node looks like afterwards wins over the answer: a removal that
// timed out but went through is Removed, and an image that a container
// started from in the meantime is InUse, whatever the runtime said (CRI-O
// refuses to remove an image in use; containerd removes it). An image the
// runtime says it removed but still lists is Refused: containerd does that
// for some side-loaded images (containerd#7698, upstream Eraser #483) on
// every later run too, until it restarts, so failing the node for it would
// fail every run for ever under successRatio 1.0, where upstream counted
// the node done.
func judgeRemoval(err error, after presence, inUse bool) (workerresult.Outcome, string) {
	switch {
	case after == presenceGone && err == nil:
		return workerresult.Removed, ""
	case after == presenceGone:
		return workerresult.Removed, fmt.Sprintf("the runtime answered %v, but the image is gone", err)
	case inUse && err == nil:
		return workerresult.InUse, "pulled again and used by a container that started during the run"
	case inUse:
		return workerresult.InUse, fmt.Sprintf("a container started from it during the removal; the runtime answered %v", err)
	case err == nil && after == presenceListed:
		return workerresult.Refused, "the runtime answered that it removed the image but still lists it; " +
			"it does so again on every run until it restarts (containerd does this for some side-loaded images)"
	case err == nil:
		return workerresult.Removed, ""
	case permanentCodes[status.Code(err)]:
		return workerresult.Refused, fmt.Sprintf("the runtime refused for good (%s, which retrying does not change): %v", status.Code(err), err)
	}
	return workerresult.Failed, err.Error()
}

// settle judges the removals of a run once all were answered: one
// container listing, then one image listing say which images are gone and
// which a container uses now. A listing that fails leaves the runtime's
// answers as they are, logged. The image listing is judged as it is read,
// and nothing of it kept: on a node of tens of thousands of images it is
// as large as the snapshot the run still holds.
func settle(ctx context.Context, rt Runtime, results []Result, log *slog.Logger) {
	pending := map[string][]int{} // image ID -> attempted results
	for i, r := range results {
		if r.attempted {
			pending[r.ImageID] = append(pending[r.ImageID], i)
		}
	}
	if len(pending) == 0 {
		return
	}
	var used protect.Containers
	if containers, err := rt.ListContainers(ctx); err != nil {
		log.Warn("could not list the containers after the removals", "error", err)
	} else {
		used = protect.NewContainers(containers)
	}
	judge := func(i int, after presence, inUse bool) {
		r := &results[i]
		outcome, detail := judgeRemoval(r.err, after, inUse)
		r.Outcome = outcome
		if detail != "" || outcome != workerresult.Removed {
			r.Detail = detail
		}
	}
	images, err := rt.ListImages(ctx)
	if err != nil {
		log.Warn("could not list the images after the removals: the runtime's answers stand", "error", err)
		for _, idx := range pending {
			for _, i := range idx {
				judge(i, presenceUnknown, false)
			}
		}
		return
	}
	for k := range images {
		idx, ok := pending[images[k].ID]
		if !ok {
			continue
		}
		inUse := used.Listed() && protect.UsedNow(images[k], used).Reason != protect.Removable
		for _, i := range idx {
			judge(i, presenceListed, inUse)
		}
		delete(pending, images[k].ID)
	}
	for _, idx := range pending {
		for _, i := range idx {
			judge(i, presenceGone, false)
		}
	}
}
