package remover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/footprint"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

const mib = 1 << 20

func TestExplainFreed(t *testing.T) {
	cases := map[string]struct {
		expected  uint64
		measured  int64
		by        string
		stillHeld uint64
		want      string // the cause's first words; "" for no note
	}{
		"equal":                           {expected: 100 * mib, measured: 100 * mib, by: MeasuredByImageFs},
		"within 5%":                       {expected: 100 * mib, measured: 96 * mib, by: MeasuredByImageFs},
		"within the slack of a small run": {expected: 1 * mib, measured: 4 * mib, by: MeasuredByImageFs},
		"records left":                    {expected: 100 * mib, measured: 10 * mib, by: MeasuredByRuntime, stillHeld: 90 * mib, want: "the runtime still holds 90.0MiB"},
		"filesystem written meanwhile":    {expected: 100 * mib, measured: 50 * mib, by: MeasuredByImageFs, want: "other writes"},
		"content awaits collection":       {expected: 100 * mib, measured: 50 * mib, by: MeasuredByRuntime, want: "the runtime has not yet deleted"},
		"more than expected":              {expected: 100 * mib, measured: 150 * mib, by: MeasuredByRuntime, want: "more than the removed images' own content: the runtime also collected content nothing held"},
		"filesystem grew":                 {expected: 100 * mib, measured: -20 * mib, by: MeasuredByImageFs, want: "other writes"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := ExplainFreed(c.expected, c.measured, c.by, c.stillHeld)
			if c.want == "" {
				if got != "" {
					t.Errorf("note %q, want none", got)
				}
				return
			}
			_, cause, _ := strings.Cut(got, ": ")
			if !strings.HasPrefix(cause, c.want) {
				t.Errorf("note %q, want its cause to begin %q", got, c.want)
			}
		})
	}
}

// layerStore plays a runtime's records: each image holds layers, some
// shared; leaked images stay in the records after their removal (the
// #13875 shape); the image filesystem holds the layers present.
type layerStore struct {
	rt     *fakeRuntime
	layers map[string][]string // image ID -> its layers
	sizes  map[string]uint64
	leaked map[string]bool
	base   uint64 // the filesystem's bytes besides the images
}

func (s *layerStore) read(context.Context) (footprint.Store, error) {
	present := map[string]bool{}
	imgs, _ := s.rt.ListImages(context.Background())
	for _, img := range imgs {
		present[img.ID] = true
	}
	for id := range s.leaked {
		present[id] = true
	}
	return layerSnapshot{s: s, present: present}, nil
}

func (s *layerStore) measure(ctx context.Context) (retention.Disk, error) {
	st, _ := s.read(ctx)
	return retention.Disk{Capacity: 1 << 40, Available: 1<<40 - s.base - st.Total()}, nil
}

type layerSnapshot struct {
	s       *layerStore
	present map[string]bool
}

func (l layerSnapshot) held(skip map[string]bool) map[string]bool {
	out := map[string]bool{}
	for id := range l.present {
		if skip[id] {
			continue
		}
		for _, layer := range l.s.layers[id] {
			out[layer] = true
		}
	}
	return out
}

func (l layerSnapshot) sum(layers map[string]bool) uint64 {
	var n uint64
	for layer := range layers {
		n += l.s.sizes[layer]
	}
	return n
}

func (l layerSnapshot) Exclusive(images []cri.Image) uint64 {
	skip := map[string]bool{}
	for _, img := range images {
		skip[img.ID] = true
	}
	return l.sum(l.held(nil)) - l.sum(l.held(skip))
}

func (l layerSnapshot) Total() uint64 { return l.sum(l.held(nil)) }

// TestRunMeasuresFreed: images sharing a layer are removed; the expected
// bytes count the shared layer once and not the layer a kept image
// shares; the filesystem (or, unseen, the records) is measured; a record
// the runtime keeps after its removal is named as the cause of the gap.
func TestRunMeasuresFreed(t *testing.T) {
	cases := map[string]struct {
		dryRun   bool
		seesDisk bool
		leaked   []string
		want     workerresult.Freed
		note     string
	}{
		"filesystem":    {seesDisk: true, want: workerresult.Freed{ExpectedBytes: 70 * mib, MeasuredBytes: 70 * mib, MeasuredBy: MeasuredByImageFs}},
		"records":       {want: workerresult.Freed{ExpectedBytes: 70 * mib, MeasuredBytes: 70 * mib, MeasuredBy: MeasuredByRuntime}},
		"dry run":       {dryRun: true, seesDisk: true, want: workerresult.Freed{ExpectedBytes: 70 * mib}},
		"a record kept": {seesDisk: true, leaked: []string{id('b')}, want: workerresult.Freed{ExpectedBytes: 70 * mib, MeasuredBytes: 10 * mib, MeasuredBy: MeasuredByImageFs}, note: "the runtime still holds 60.0MiB"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &fakeRuntime{images: []cri.Image{{ID: id('a'), Tags: []string{"a:1"}}, {ID: id('b'), Tags: []string{"b:1"}}, {ID: id('k'), Tags: []string{"k:1"}}}}
			store := &layerStore{rt: rt, base: 5 * mib,
				layers: map[string][]string{id('a'): {"base", "a-own"}, id('b'): {"base", "b-own", "kept-shared"}, id('k'): {"kept-shared", "k-own"}},
				sizes:  map[string]uint64{"base": 20 * mib, "a-own": 10 * mib, "b-own": 40 * mib, "kept-shared": 15 * mib, "k-own": 5 * mib},
			}
			info := &RunInfo{}
			opts := Options{DryRun: c.dryRun, Info: info, Footprint: store.read}
			if c.seesDisk {
				opts.MeasureFreed = store.measure
			}
			rt.onList = func(int, *fakeRuntime) {
				// The leak happens once the removal is issued.
				store.leaked = map[string]bool{}
				for _, l := range c.leaked {
					store.leaked[l] = true
				}
			}
			targets, _ := ParseTargets([]string{"a:1", "b:1"})
			if _, err := Run(context.Background(), rt, targets, opts); err != nil {
				t.Fatal(err)
			}
			if info.Freed == nil {
				t.Fatal("no freed bytes reported")
			}
			got := *info.Freed
			note := got.Note
			got.Note = ""
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !strings.Contains(note, c.note) || (c.note == "") != (note == "") {
				t.Errorf("note %q, want one containing %q", note, c.note)
			}
		})
	}
}

// TestRunReadsContainerdOnce: a run reads containerd's records once
// before its removals and once after, and the leftover search judges the
// reading after them (taken once the image filesystem has settled)
// instead of reading every namespace again; where the run takes no
// reading after (a dry run, nothing removed, the first reading failed),
// the search takes its own.
func TestRunReadsContainerdOnce(t *testing.T) {
	cases := map[string]struct {
		dryRun, seesDisk, noLeftovers, firstFails bool
		targets                                   []string
		want                                      []string
	}{
		"removals, measured by the records": {targets: []string{"a:1", "b:1"},
			want: []string{"read 1, 0 removed", "read 2, 2 removed", "leftovers of read 2"}},
		"removals, measured on the image filesystem": {seesDisk: true, targets: []string{"a:1", "b:1"},
			want: []string{"read 1, 0 removed", "measure", "measure", "read 2, 2 removed", "leftovers of read 2"}},
		"no leftover search": {noLeftovers: true, targets: []string{"a:1"},
			want: []string{"read 1, 0 removed", "read 2, 1 removed"}},
		"a dry run": {dryRun: true, seesDisk: true, targets: []string{"a:1"},
			want: []string{"read 1, 0 removed", "read 2, 0 removed", "leftovers of read 2"}},
		"nothing removed": {targets: []string{"z:1"},
			want: []string{"read 1, 0 removed", "read 2, 0 removed", "leftovers of read 2"}},
		"the reading before failed": {firstFails: true, targets: []string{"a:1"},
			want: []string{"read 1 failed", "read 2, 1 removed", "leftovers of read 2"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &fakeRuntime{images: []cri.Image{{ID: id('a'), Tags: []string{"a:1"}}, {ID: id('b'), Tags: []string{"b:1"}}, {ID: id('k'), Tags: []string{"k:1"}}}}
			var events []string
			reads := 0
			read := func(ctx context.Context) (containerdrecords.Records, error) {
				reads++
				if reads == 1 && c.firstFails {
					events = append(events, "read 1 failed")
					return containerdrecords.Records{}, errors.New("containerd is restarting")
				}
				rt.mu.Lock()
				removed := len(rt.removed)
				rt.mu.Unlock()
				events = append(events, fmt.Sprintf("read %d, %d removed", reads, removed))
				imgs, _ := rt.ListImages(ctx)
				k8s := containerdrecords.Namespace{Name: reclaim.CRINamespace}
				for _, img := range imgs {
					k8s.Images = append(k8s.Images, containerdrecords.Image{Name: img.Tags[0], Target: img.ID})
				}
				// An image of another namespace names the reading.
				marker := containerdrecords.Namespace{Name: fmt.Sprintf("read-%d", reads), Images: []containerdrecords.Image{{Name: "x:1", Target: id('x')}}}
				return containerdrecords.Records{Namespaces: []containerdrecords.Namespace{k8s, marker}}, nil
			}
			opts := Options{DryRun: c.dryRun, ContainerdRecords: read,
				Footprint: func(ctx context.Context) (footprint.Store, error) {
					r, err := read(ctx)
					if err != nil {
						return nil, err
					}
					return footprint.ContainerdStore(r, reclaim.CRINamespace), nil
				}}
			if c.seesDisk {
				opts.MeasureFreed = func(context.Context) (retention.Disk, error) {
					events = append(events, "measure")
					return retention.Disk{Capacity: 1 << 40, Available: 1 << 39}, nil
				}
			}
			if !c.noLeftovers {
				opts.Leftovers = func(_ context.Context, _ protect.Policy, _ bool, handed *containerdrecords.Records) ([]reclaim.Result, error) {
					found, err := search(handed, reclaim.DefaultAges, time.Now(), func(now time.Time) ([]leftover.Leftover, error) {
						r, err := read(context.Background())
						return reclaim.InContainerd(r, reclaim.DefaultAges, now), err
					})
					if err != nil {
						return nil, err
					}
					for _, l := range found {
						if l.Kind == leftoverkind.OtherNamespace {
							events = append(events, "leftovers of "+strings.ReplaceAll(l.Namespace, "-", " "))
						}
					}
					return nil, nil
				}
			}
			targets, _ := ParseTargets(c.targets)
			if _, err := Run(context.Background(), rt, targets, opts); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, events); diff != "" {
				t.Errorf("readings (-want +got):\n%s", diff)
			}
		})
	}
}
