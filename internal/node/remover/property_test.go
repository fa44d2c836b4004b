package remover

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/retention"
)

// refForms are the ways a container can name its image, as runtimes and
// kubelets report them.
var refForms = map[string]func(img cri.Image, r *rand.Rand) (string, bool){
	"image ID":                       func(img cri.Image, _ *rand.Rand) (string, bool) { return img.ID, true },
	"bare hex ID":                    func(img cri.Image, _ *rand.Rand) (string, bool) { return strings.TrimPrefix(img.ID, "sha256:"), true },
	"docker:// ID":                   func(img cri.Image, _ *rand.Rand) (string, bool) { return "docker://" + img.ID, true },
	"repo digest":                    pick(func(img cri.Image) []string { return img.Digests }, ""),
	"docker-pullable:// repo digest": pick(func(img cri.Image) []string { return img.Digests }, "docker-pullable://"),
	"full tag":                       pick(func(img cri.Image) []string { return img.Tags }, ""),
	"short tag": pick(func(img cri.Image) []string {
		var out []string
		for _, t := range img.Tags {
			out = append(out, strings.TrimPrefix(t, "docker.io/library/"))
		}
		return out
	}, ""),
	"short name (latest)": pick(func(img cri.Image) []string {
		var out []string
		for _, t := range img.Tags {
			if name, ok := strings.CutSuffix(t, ":latest"); ok {
				out = append(out, strings.TrimPrefix(name, "docker.io/library/"))
			}
		}
		return out
	}, ""),
}

func pick(names func(cri.Image) []string, prefix string) func(cri.Image, *rand.Rand) (string, bool) {
	return func(img cri.Image, r *rand.Rand) (string, bool) {
		n := names(img)
		if len(n) == 0 {
			return "", false
		}
		return prefix + n[r.IntN(len(n))], true
	}
}

func randomNode(r *rand.Rand) []cri.Image {
	repos := []string{"docker.io/library/nginx", "docker.io/library/alpine", "quay.io/org/app", "registry.k8s.io/pause", "example.com:5000/team/svc"}
	images := make([]cri.Image, 2+r.IntN(12))
	for i := range images {
		img := cri.Image{ID: fmt.Sprintf("sha256:%064x", r.Uint64()), Size: 1}
		for range r.IntN(3) {
			tag := []string{"latest", "1", "1.27", "v2"}[r.IntN(4)]
			img.Tags = append(img.Tags, repos[r.IntN(len(repos))]+":"+tag)
		}
		for range r.IntN(2) {
			img.Digests = append(img.Digests, fmt.Sprintf("%s@sha256:%064x", repos[r.IntN(len(repos))], r.Uint64()))
		}
		images[i] = img
	}
	return images
}

// TestNoReferencedImageIsPlanned: for random nodes and containers naming
// their images in every form runtimes use, no image a container refers to
// is ever planned for removal, by "*" or by any explicit entry.
func TestNoReferencedImageIsPlanned(t *testing.T) {
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 7))
		images := randomNode(r)
		var containers []cri.Container
		used := map[int]string{}
		for i, img := range images {
			if r.IntN(2) == 0 {
				continue
			}
			for form, make := range refForms {
				ref, ok := make(img, r)
				if !ok || r.IntN(3) != 0 {
					continue
				}
				// One field at a time: each must protect on its own.
				c := cri.Container{ID: fmt.Sprintf("c%d", len(containers)), Name: form}
				switch r.IntN(3) {
				case 0:
					c.Image = ref
				case 1:
					c.ImageRef = ref
				default:
					c.ImageID = ref
				}
				containers = append(containers, c)
				used[i] = form + " " + ref
			}
		}
		s := NewSnapshot(images, containers, protect.Policy{})
		entries := []string{"*"}
		for _, img := range images {
			entries = append(entries, img.ID)
			entries = append(entries, img.Tags...)
		}
		targets, _ := ParseTargets(entries)
		remove, _, _ := Plan(s, targets, Retention{})
		for _, rm := range remove {
			if ref, ok := used[rm.Image]; ok {
				t.Fatalf("seed %d: image %v is used by a container (%s) but planned for removal", seed, images[rm.Image], ref)
			}
		}
	}
}

// TestNoYoungImagePlannedAutomatically: whatever the node, the ages, the
// settings and the kind of run, no image younger than the minimum age is
// planned for removal unless an ImageList entry names it.
func TestNoYoungImagePlannedAutomatically(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 11))
		images := randomNode(r)
		ages := make([]Age, len(images))
		for i := range ages {
			ages[i] = Age{Arrived: now.Add(-time.Duration(r.IntN(120)) * time.Minute)}
			if r.IntN(2) == 0 {
				ages[i].LastUsed = ages[i].Arrived.Add(time.Duration(r.IntN(30)) * time.Minute)
			}
		}
		settings := retention.Settings{MinAge: time.Duration(r.IntN(90)) * time.Minute}
		if r.IntN(2) == 0 {
			settings.UnusedFor = time.Duration(1+r.IntN(60)) * time.Minute
		}
		if r.IntN(2) == 0 {
			settings.HighThresholdPercent, settings.LowThresholdPercent = 50, 40
		}
		var targets Targets
		listed := map[int]bool{}
		switch r.IntN(3) {
		case 0:
			targets.All = true
		case 1:
			targets.Scheduled = true
			for _, img := range images {
				targets.Collected = append(targets.Collected, img.ID)
			}
		default:
			targets.Scheduled, targets.Scanned = true, true
			targets.Handed = handed(images[r.IntN(len(images))].ID, images[r.IntN(len(images))].ID)
		}
		if r.IntN(2) == 0 {
			i := r.IntN(len(images))
			listed[i] = true
			more, _ := ParseTargets([]string{images[i].ID})
			targets.Refs, targets.Entries = more.Refs, more.Entries
		}
		s := NewSnapshot(images, nil, protect.Policy{})
		remove, _, _ := Plan(s, targets, Retention{Settings: settings, Now: now, Ages: ages,
			Disk: &retention.Disk{Capacity: 100, Available: uint64(r.IntN(100))}})
		for _, rm := range remove {
			if young := now.Sub(ages[rm.Image].Arrived) < settings.MinAge; young && !listed[rm.Image] {
				t.Fatalf("seed %d: image %d arrived %v ago, under the minimum age %v, planned by %s", seed, rm.Image, now.Sub(ages[rm.Image].Arrived), settings.MinAge, rm.Policy)
			}
		}
	}
}
