package remover

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/references"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestProtectionDecides: what the cluster-aware protections keep, from
// which policy, and what an ImageList naming the image still removes.
func TestProtectionDecides(t *testing.T) {
	pulled := func(id, repo string) cri.Image {
		return cri.Image{ID: id, Tags: []string{repo + ":1"}, Digests: []string{repo + "@sha256:" + fmt.Sprintf("%064x", len(id))}, Size: 10}
	}
	web := pulled("sha256:"+fmt.Sprintf("%064x", 1), "docker.io/library/web")
	job := pulled("sha256:"+fmt.Sprintf("%064x", 2), "registry:5000/team/job")
	free := pulled("sha256:"+fmt.Sprintf("%064x", 3), "quay.io/org/free")
	imported := cri.Image{ID: "sha256:" + fmt.Sprintf("%064x", 4), Tags: []string{"docker.io/library/airgap:1"}, Size: 10}
	local := cri.Image{ID: "sha256:" + fmt.Sprintf("%064x", 5), Tags: []string{"localhost/kubernetes/pause:0.1"},
		Digests: []string{"localhost/kubernetes/pause@sha256:" + fmt.Sprintf("%064x", 5)}, Size: 10}
	dangling := cri.Image{ID: "sha256:" + fmt.Sprintf("%064x", 6), Size: 10}
	images := []cri.Image{web, job, free, imported, local, dangling}
	nodeRefs := []references.Ref{{Image: "web:1", Owner: "Pod shop/web-0"}}
	clusterRefs := []references.Ref{{Image: "registry:5000/team/job@" + job.Digests[0][len("registry:5000/team/job@"):], Owner: "CronJob batch/nightly"}}
	all := protect.Cluster{Read: true, KeepNotRepullable: true, RemoveVulnerable: true}
	type outcome struct{ Outcome, Detail string }
	cases := map[string]struct {
		targets    Targets
		protection protect.Cluster
		want       map[string]outcome
	}{
		`"*" keeps what the cluster references and what cannot be pulled back`: {
			targets: Targets{All: true}, protection: all,
			want: map[string]outcome{
				web.ID: {"referenced", "pod shop/web-0 on this node"}, job.ID: {"referenced", "referenced by CronJob batch/nightly"},
				free.ID: {"removed", ""}, imported.ID: {"not re-pullable", "no repository digest"}, local.ID: {"not re-pullable", "repository digest on localhost/ only"}, dangling.ID: {"removed", ""},
			},
		},
		"a scheduled run without a scanner keeps them too": {
			targets: Targets{Scheduled: true, Collected: ids(images)}, protection: all,
			want: map[string]outcome{
				web.ID: {"referenced", "pod shop/web-0 on this node"}, job.ID: {"referenced", "referenced by CronJob batch/nightly"},
				free.ID: {"removed", ""}, imported.ID: {"not re-pullable", "no repository digest"}, local.ID: {"not re-pullable", "repository digest on localhost/ only"}, dangling.ID: {"removed", ""},
			},
		},
		"an ImageList naming them removes them": {
			targets: mustTargets(t, "web:1", "registry:5000/team/job:1", "airgap:1", "localhost/kubernetes/pause:0.1"), protection: all,
			want: map[string]outcome{web.ID: {"removed", ""}, job.ID: {"removed", ""}, imported.ID: {"removed", ""}, local.ID: {"removed", ""}},
		},
		"the scanner's verdict removes a template-only reference": {
			targets: scanned(images, web, job, imported), protection: all,
			want: map[string]outcome{web.ID: {"referenced", "pod shop/web-0 on this node"}, job.ID: {"removed", ""}, imported.ID: {"not re-pullable", "no repository digest"}},
		},
		"removeVulnerableReferenced false keeps it": {
			targets: scanned(images, job), protection: protect.Cluster{Read: true, KeepNotRepullable: true},
			want: map[string]outcome{job.ID: {"referenced", "referenced by CronJob batch/nightly"}},
		},
		"protections off": {
			targets: Targets{All: true},
			want:    map[string]outcome{web.ID: {"removed", ""}, job.ID: {"removed", ""}, free.ID: {"removed", ""}, imported.ID: {"removed", ""}, local.ID: {"removed", ""}, dangling.ID: {"removed", ""}},
		},
		"a node set that did not fit keeps every image from the automatic policies": {
			targets: Targets{All: true}, protection: protect.Cluster{Read: true, NodeIncomplete: true},
			want: map[string]outcome{web.ID: {"referenced", ""}, job.ID: {"referenced", ""}, free.ID: {"referenced", ""}, imported.ID: {"referenced", ""}, local.ID: {"referenced", ""}, dangling.ID: {"referenced", ""}},
		},
		"a cluster set written incomplete keeps every image from the automatic policies": {
			targets: Targets{All: true}, protection: protect.Cluster{Read: true, ClusterIncomplete: true},
			want: map[string]outcome{
				web.ID: {"referenced", "pod shop/web-0 on this node"}, job.ID: {"referenced", "referenced by CronJob batch/nightly"},
				free.ID: {"referenced", "the cluster's references could not be written whole for this run"}, imported.ID: {"referenced", "the cluster's references could not be written whole for this run"}, local.ID: {"referenced", "the cluster's references could not be written whole for this run"}, dangling.ID: {"referenced", "the cluster's references could not be written whole for this run"},
			},
		},
		"an ImageList entry still removes what a cluster set written incomplete keeps": {
			targets: mustTargets(t, job.Tags[0]), protection: protect.Cluster{Read: true, ClusterIncomplete: true},
			want: map[string]outcome{job.ID: {"removed", ""}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewSnapshot(images, nil, protect.Policy{})
			for _, r := range nodeRefs {
				s.Refer(r, true)
			}
			for _, r := range clusterRefs {
				s.Refer(r, false)
			}
			remove, results, _ := Plan(s, tc.targets, Retention{Settings: retention.Settings{}, Now: time.Now(), Cluster: tc.protection})
			got := map[string]outcome{}
			for _, rm := range remove {
				got[s.Images[rm.Image].ID] = outcome{"removed", ""}
			}
			for _, res := range results {
				o := outcome{string(res.Outcome), res.Detail}
				switch {
				case res.Outcome == workerresult.NotRepullable, res.Outcome == workerresult.Referenced && tc.protection.ClusterIncomplete:
					// What the runtime shows, or what is missing; the
					// rest is the same for all (protect's tests pin it).
					o.Detail, _, _ = strings.Cut(res.Detail, ":")
				case res.Outcome == workerresult.Referenced && tc.protection.NodeIncomplete:
					o.Detail = ""
				}
				got[res.ImageID] = o
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes by image (-want +got):\n%s", diff)
			}
		})
	}
}

func ids(images []cri.Image) []string {
	var out []string
	for _, img := range images {
		out = append(out, img.ID)
	}
	return out
}

func mustTargets(t *testing.T, entries ...string) Targets {
	t.Helper()
	tg, invalid := ParseTargets(entries)
	if len(invalid) > 0 {
		t.Fatal(invalid)
	}
	return tg
}

// scanned is a scanner run's targets: every image collected, these handed.
func scanned(images []cri.Image, vulnerable ...cri.Image) Targets {
	tg := Targets{Scheduled: true, Scanned: true, Collected: ids(images)}
	for _, img := range vulnerable {
		r, _ := imageref.Parse(img.ID)
		tg.Handed = append(tg.Handed, r)
	}
	return tg
}

// TestNoWorkloadImageIsPlannedByAnAutomaticPolicy is the property:
// for random nodes, and pods and workload templates naming the node's
// images in every form a user or a runtime writes, no image a pod on the
// node or a template references, and none that cannot be pulled back, is
// planned for removal by "*", a sweep, unusedFor or disk pressure; a
// scanner's verdict takes a template-only reference only when allowed.
func TestNoWorkloadImageIsPlannedByAnAutomaticPolicy(t *testing.T) {
	settings := []retention.Settings{{}, {UnusedFor: time.Hour}, {HighThresholdPercent: 50, LowThresholdPercent: 10}}
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 25))
		images := randomNode(r)
		s := NewSnapshot(images, nil, protect.Policy{})
		onNode, inCluster := map[int]string{}, map[int]string{}
		for i, img := range images {
			for form, make := range refForms {
				ref, ok := make(img, r)
				if !ok || r.IntN(6) != 0 {
					continue
				}
				node := r.IntN(2) == 0
				s.Refer(references.Ref{Image: ref, Owner: "Pod ns/p"}, node)
				if node {
					onNode[i] = form + " " + ref
				} else {
					inCluster[i] = form + " " + ref
				}
			}
		}
		p := protect.Cluster{Read: true, KeepNotRepullable: true, RemoveVulnerable: r.IntN(2) == 0}
		var targets Targets
		switch r.IntN(3) {
		case 0:
			targets = Targets{All: true}
		case 1:
			targets = Targets{Scheduled: true, Collected: ids(images)}
		default:
			var handed []cri.Image
			for _, img := range images {
				if r.IntN(2) == 0 {
					handed = append(handed, img)
				}
			}
			targets = scanned(images, handed...)
		}
		disk := &retention.Disk{Capacity: 100, Available: 0}
		remove, _, spare := Plan(s, targets, Retention{Settings: settings[r.IntN(len(settings))], Now: time.Now().Add(1000 * time.Hour), Disk: disk, Cluster: p})
		planned := map[int]retention.Policy{}
		for _, rm := range remove {
			planned[rm.Image] = rm.Policy
		}
		for _, c := range spare {
			planned[c.Index] = retention.DiskPressure
		}
		for i, policy := range planned {
			switch {
			case protect.CannotPullBack(images[i]):
				t.Fatalf("seed %d: %v cannot be pulled back and is planned (%s)", seed, images[i], policy)
			case onNode[i] != "":
				t.Fatalf("seed %d: %v is referenced by a pod on the node (%s) and planned (%s)", seed, images[i], onNode[i], policy)
			case inCluster[i] != "" && !(policy == retention.Vulnerable && p.RemoveVulnerable):
				t.Fatalf("seed %d: %v is referenced by a template (%s) and planned (%s)", seed, images[i], inCluster[i], policy)
			}
		}
	}
}

// FuzzReferenceMatchesAsInUse: a reference protects exactly the images a
// container naming its image by the same string would keep in use: the
// two protections cannot drift apart.
func FuzzReferenceMatchesAsInUse(f *testing.F) {
	for _, s := range []string{"nginx", "docker.io/library/nginx:1.27", "quay.io/org/app:v2", "registry:5000/app@sha256:" + fmt.Sprintf("%064x", 9),
		"sha256:" + fmt.Sprintf("%064x", 1), "docker-pullable://nginx@sha256:" + fmt.Sprintf("%064x", 2), "example.com:5000/team/svc:1", "NGINX", ""} {
		f.Add(s, uint64(1))
	}
	f.Fuzz(func(t *testing.T, ref string, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 3))
		images := randomNode(r)
		if r.IntN(2) == 0 {
			// The reference names one of the images in some form.
			form := slices.Sorted(func(yield func(string) bool) {
				for k := range refForms {
					if !yield(k) {
						return
					}
				}
			})[r.IntN(len(refForms))]
			if s, ok := refForms[form](images[r.IntN(len(images))], r); ok {
				ref = s
			}
		}
		referenced := NewSnapshot(images, nil, protect.Policy{})
		referenced.Refer(references.Ref{Image: ref, Owner: "Deployment ns/d"}, false)
		inUse := NewSnapshot(images, []cri.Container{{ID: "c", Name: "c", Image: ref}}, protect.Policy{})
		for i := range images {
			_, got := referenced.referenced[int32(i)]
			if want := inUse.InUse(i); got != want {
				t.Fatalf("reference %q: image %v referenced=%v, in use by a container of that image=%v", ref, images[i], got, want)
			}
		}
	})
}
