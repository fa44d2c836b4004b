package remover

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/footprint"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Where a run's freed bytes were measured.
const (
	// MeasuredByImageFs: the image filesystem's used bytes before the
	// removals and after the runtime's clean-up, as statfs reports them.
	MeasuredByImageFs = "imagefs"
	// MeasuredByRuntime: the bytes the runtime's records take before and
	// after, where the pod cannot see the image filesystem.
	MeasuredByRuntime = "runtime"
)

// FreedTolerance is how far the measured bytes may stray from the
// expected before the summary explains the difference: 5% of the
// expected, and never less than FreedSlack, which a live filesystem's own
// writes (logs, a pull, a container's layer) move in seconds.
const (
	FreedTolerance = 0.05
	FreedSlack     = 4 << 20
)

// Cleanup settles: a runtime may free a removed image's space after its
// RemoveImage answers (a snapshotter removing asynchronously). The image
// filesystem is measured again every freedPoll until two readings agree
// within freedStable, for at most freedSettle.
const (
	freedSettle = 10 * time.Second
	freedPoll   = 500 * time.Millisecond
	freedStable = 1 << 20
)

// freedProbe is what a run reads before its removals to tell afterwards
// what they freed.
type freedProbe struct {
	records    footprint.Store
	recordsErr error
	disk       *retention.Disk
	diskErr    error
}

// probeFreed reads the runtime's records and, on a real run where the pod
// sees it, the image filesystem; disk is the disk policy's reading, when
// it took one.
func probeFreed(ctx context.Context, opts Options, disk *retention.Disk) *freedProbe {
	p := &freedProbe{disk: disk}
	if opts.Footprint != nil {
		p.records, p.recordsErr = opts.Footprint(ctx)
		if p.recordsErr != nil {
			opts.Log.Warn("the runtime's records could not be read: the bytes the run frees are not known ahead", "error", p.recordsErr)
		}
	}
	if !opts.DryRun && opts.MeasureFreed != nil && p.disk == nil {
		d, err := opts.MeasureFreed(ctx)
		if err != nil {
			p.diskErr = err
		} else {
			p.disk = &d
		}
	}
	return p
}

// finish measures what the removals freed and explains a difference from
// what they should have. It returns containerd's records as read after the
// removals, when it read them, for the leftover search to judge (nil
// otherwise: the search reads them itself).
func (p *freedProbe) finish(ctx context.Context, opts Options, s *Snapshot, results []Result) (*workerresult.Freed, *containerdrecords.Records) {
	removed := removedImages(s, results)
	if len(removed) == 0 {
		return nil, nil
	}
	f := &workerresult.Freed{}
	if p.records != nil {
		f.ExpectedBytes = p.records.Exclusive(removed)
	} else if p.recordsErr != nil {
		f.Error = "the runtime's records: " + p.recordsErr.Error()
	}
	if opts.DryRun {
		return f, nil
	}
	// The image filesystem first: once it has settled, the records read
	// next show what the runtime's clean-up left, for this measure and
	// for the leftover search that follows.
	var disk *retention.Disk
	if p.disk != nil && opts.MeasureFreed != nil {
		d, err := settledDisk(ctx, opts.MeasureFreed, p.disk.Used(), f.ExpectedBytes, p.records != nil)
		if err != nil {
			f.Error = joinNote(f.Error, "measuring the image filesystem after the removals: "+err.Error())
			return f, nil
		}
		disk = &d
	}
	var after footprint.Store
	var handed *containerdrecords.Records
	if opts.Footprint != nil && p.records != nil {
		var err error
		if after, handed, err = readAfter(ctx, opts); err != nil {
			opts.Log.Warn("the runtime's records could not be read after the removals", "error", err)
		}
	}
	switch {
	case disk != nil:
		f.MeasuredBy, f.MeasuredBytes = MeasuredByImageFs, int64(p.disk.Used())-int64(disk.Used())
	case after != nil:
		f.MeasuredBy, f.MeasuredBytes = MeasuredByRuntime, int64(p.records.Total())-int64(after.Total())
	default:
		if p.diskErr != nil {
			f.Error = joinNote(f.Error, "measuring the image filesystem: "+p.diskErr.Error())
		}
		return f, handed
	}
	var stillHeld uint64
	if after != nil {
		stillHeld = after.Exclusive(removed)
	}
	if p.records != nil {
		f.Note = ExplainFreed(f.ExpectedBytes, f.MeasuredBytes, f.MeasuredBy, stillHeld)
	}
	return f, handed
}

// readAfter reads the runtime's records after the removals: containerd's
// through opts.ContainerdRecords when set, so that the same reading serves
// the leftover search, which would read every namespace again.
func readAfter(ctx context.Context, opts Options) (footprint.Store, *containerdrecords.Records, error) {
	if opts.ContainerdRecords == nil {
		s, err := opts.Footprint(ctx)
		return s, nil, err
	}
	r, err := opts.ContainerdRecords(ctx)
	if err != nil {
		return nil, nil, err
	}
	return footprint.ContainerdStore(r, reclaim.CRINamespace), &r, nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// removedImages are the images the results removed (would remove, on a
// dry run).
func removedImages(s *Snapshot, results []Result) []cri.Image {
	want := map[string]bool{}
	for _, r := range results {
		if r.Outcome == workerresult.Removed && r.ImageID != "" {
			want[r.ImageID] = true
		}
	}
	var out []cri.Image
	for _, img := range s.Images {
		if want[img.ID] {
			out = append(out, img)
		}
	}
	return out
}

// settledDisk measures the image filesystem once the runtime's clean-up
// is done: at once when the reading is what the records expect, else
// again until two readings agree.
func settledDisk(ctx context.Context, measure func(context.Context) (retention.Disk, error), before, expected uint64, known bool) (retention.Disk, error) {
	d, err := measure(ctx)
	if err != nil {
		return d, err
	}
	if known && withinTolerance(expected, int64(before)-int64(d.Used())) {
		return d, nil
	}
	deadline := time.Now().Add(freedSettle)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return d, nil
		case <-time.After(freedPoll):
		}
		next, err := measure(ctx)
		if err != nil {
			return d, nil
		}
		stable := absDiff(next.Used(), d.Used()) < freedStable
		d = next
		if stable {
			break
		}
	}
	return d, nil
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

func withinTolerance(expected uint64, measured int64) bool {
	slack := max(uint64(float64(expected)*FreedTolerance), FreedSlack)
	return absDiff(expected, uint64(max(measured, 0))) <= slack && measured >= 0
}

// ExplainFreed says why the measured bytes differ from the expected, when
// they differ by more than the tolerance: stillHeld is what the runtime's
// records still hold of the removed images after the run.
func ExplainFreed(expected uint64, measured int64, by string, stillHeld uint64) string {
	if withinTolerance(expected, measured) {
		return ""
	}
	gap := fmt.Sprintf("freed %s of the %s expected", bytesize.FormatSigned(measured), bytesize.Format(expected))
	switch {
	case measured < int64(expected) && stillHeld > 0:
		return gap + fmt.Sprintf(": the runtime still holds %s of the removed images (records a removal left behind; `eraser node list --leftovers` lists them)", bytesize.Format(stillHeld))
	case measured < int64(expected) && by == MeasuredByImageFs:
		return gap + ": other writes to the image filesystem during the run (pulls, containers' layers, logs), or space the runtime frees later"
	case measured < int64(expected):
		return gap + ": the runtime has not yet deleted all of the removed images' content (its garbage collector runs later)"
	case by == MeasuredByImageFs:
		return gap + ": more than the removed images' own content: the runtime also collected content nothing held, or other files on the image filesystem were deleted during the run"
	default:
		return gap + ": more than the removed images' own content: the runtime also collected content nothing held"
	}
}

// SetFreedMeters sets how a run measures what it frees on the node of
// client (MeasureFreed, Footprint, ContainerdRecords).
// The image filesystem is measured where this process sees it: at
// imageFsPath or imageStore (a pod's mounts of the host's directories), or
// anywhere when sees (a Windows HostProcess pod, the node command on the
// node itself). The runtime's records are containerd's, read through its
// CRI endpoint (containerd's own API too: its unix socket, or its named
// pipe on Windows), or CRI-O's image store (containers/storage's records,
// at imageStore).
func SetFreedMeters(opts *Options, client *cri.Client, imageFsPath, imageStore string, sees bool) {
	if at := cmp.Or(imageFsPath, imageStore); at != "" || sees {
		opts.MeasureFreed = ImageFsMeter(client, at)
	}
	switch {
	case client.RuntimeName == "containerd":
		address := client.Address
		opts.Footprint = footprint.Containerd(address, reclaim.CRINamespace)
		opts.ContainerdRecords = func(ctx context.Context) (containerdrecords.Records, error) {
			return containerdrecords.Read(ctx, address)
		}
	case imageStore != "":
		opts.Footprint = footprint.CRIO(imageStore)
	}
}
