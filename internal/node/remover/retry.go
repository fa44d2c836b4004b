package remover

import (
	"context"
	"strings"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// noSpace is how a full disk reads in a runtime's answer: containerd and
// CRI-O pass the OS error's text through gRPC under code Unknown.
const noSpace = "no space left on device"

// refusedForRoom is whether the runtime failed a removal because its disk
// was full: it could not write the deletion's own record (containerd's
// metadata database, CRI-O's image index), so the image stayed.
func refusedForRoom(r Result) bool {
	return r.attempted && r.Outcome == workerresult.Failed && r.err != nil && strings.Contains(r.err.Error(), noSpace)
}

// retryRefusedForRoom issues once more the removals a full disk refused,
// when other removals of the run went through: on a full disk the first
// removals issued together can all be refused while the rest free room.
// Each retried image is re-checked on a fresh container listing first, as
// every removal is, and judged again once answered; its new result takes
// the old one's place in done.
func retryRefusedForRoom(ctx context.Context, rt Runtime, s *Snapshot, done []Result, opts Options) {
	if opts.DryRun || !removedAny(done) {
		return
	}
	var refused []int
	for i, r := range done {
		if refusedForRoom(r) {
			refused = append(refused, i)
		}
	}
	if len(refused) == 0 {
		return
	}
	again := make([]Removal, 0, len(refused))
	at := refused[:0]
	for _, i := range refused {
		// The snapshot's own index, by the image ID among its keys.
		img := -1
		for _, k := range s.lookup(done[i].ImageID) {
			if s.Images[k].ID == done[i].ImageID {
				img = k
				break
			}
		}
		if img < 0 {
			continue
		}
		again = append(again, Removal{Image: img, Target: done[i].Target, Policy: done[i].Policy,
			Detail: "removed on a second attempt: the first was refused on a full disk, before other removals freed room"})
		at = append(at, i)
	}
	opts.Log.Info("issuing again the removals a full disk refused, now that other removals freed room", "images", len(again))
	opts.Progress = nil
	res := execute(ctx, rt, s, again, opts)
	settle(ctx, rt, res, opts.Log)
	for k, i := range at {
		done[i] = res[k]
	}
}
