package remover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eraser-oss/eraser/internal/cri"
	"github.com/eraser-oss/eraser/internal/nodestate"
)

// Where ages come from (report.Summary.AgeSource).
const (
	// AgeRuntime: the runtime's image records (containerd).
	AgeRuntime = "runtime"
	// AgeFirstSeen: when Eraser first saw the image on the node.
	AgeFirstSeen = "first seen"
)

// imageTimer is a runtime that records when it pulled or re-tagged images:
// the newest time of each image record, by record name (cri.Client).
type imageTimer interface {
	ImageTimes(ctx context.Context) (map[string]time.Time, error)
}

// NodeAges records this reading of the node in its state file (when
// stateDir is set) and returns each image's age and last use. An image's
// arrival is the newest time of the runtime's records for its ID, tags and
// digests; when the runtime keeps no records, or none for the image, it is
// when the state file first saw it (now, for an image new to the file).
func NodeAges(ctx context.Context, rt Runtime, s *Snapshot, stateDir string, now time.Time) ([]Age, string, error) {
	state := &nodestate.State{Images: map[string]nodestate.Entry{}}
	if stateDir != "" {
		var err error
		if state, err = nodestate.Load(stateDir); err != nil {
			return nil, "", err
		}
	}
	ids := make([]string, len(s.Images))
	for i, img := range s.Images {
		ids[i] = img.ID
	}
	state.Observe(now, ids, s.InUse)
	if stateDir != "" {
		if err := nodestate.Save(stateDir, state); err != nil {
			return nil, "", err
		}
	}
	var times map[string]time.Time
	source := AgeFirstSeen
	if timer, ok := rt.(imageTimer); ok {
		t, err := timer.ImageTimes(ctx)
		switch {
		case err == nil:
			times, source = t, AgeRuntime
		case errors.Is(err, cri.ErrNoImageTimes):
		default:
			return nil, "", fmt.Errorf("reading when images were pulled: %w", err)
		}
	}
	ages := make([]Age, len(s.Images))
	for i, img := range s.Images {
		e := state.Images[img.ID]
		ages[i] = Age{Arrived: e.FirstSeen, LastUsed: e.LastUsed, FirstSeen: e.FirstSeen}
		if times == nil {
			continue
		}
		var newest time.Time
		for _, name := range append(append([]string{img.ID}, img.Tags...), img.Digests...) {
			if t, ok := times[name]; ok && t.After(newest) {
				newest = t
			}
		}
		if !newest.IsZero() {
			ages[i].Arrived = newest
		}
	}
	return ages, source, nil
}
