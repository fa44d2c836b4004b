package podspec

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestReservedAreThePodsOwn: the names and scanner mount paths the
// configuration refuses (paths.ReservedVolume, paths.ReservedScannerMount)
// are exactly what the worker pods use: a volume added here without being
// reserved there would let a scanner volume break every run again.
const crioReclaiming = "manager: {runtime: {name: crio}, leftovers: {reclaim: [orphan-container, unreferenced-layer]}}"

func TestReservedAreThePodsOwn(t *testing.T) {
	const scanning = "manager: {retention: {highThresholdPercent: 85, lowThresholdPercent: 80, registryCheck: {credentialsSecret: creds}}}\n" +
		"components: {collector: {enabled: true}, scanner: {enabled: true}}"
	pods := map[string]Params{
		"manual":              {References: testRefs, Job: "j", Kind: KindManual, Node: "n", OS: podpaths.Linux, ConfigMap: "j", ConfigKey: "c.yaml", Config: cfg(t, ""), Exclusions: []string{"keep"}},
		"scheduled":           {References: testRefs, Job: "s", Kind: KindCollector, Node: "n", OS: podpaths.Linux, ConfigMap: "s", ConfigKey: "c.yaml", Config: cfg(t, scanning), Exclusions: []string{"keep"}},
		"reclaiming on CRI-O": {References: testRefs, Job: "r", Kind: KindManual, Node: "n", OS: podpaths.Linux, ConfigMap: "r", ConfigKey: "c.yaml", Config: cfg(t, crioReclaiming)},
	}
	used := map[string]bool{}
	for name, p := range pods {
		pod, err := Build(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range pod.Spec.Volumes {
			if podpaths.ReservedVolume(v.Name) == "" {
				t.Errorf("%s: volume %s is the pod's own but not reserved", name, v.Name)
			}
			if !strings.HasPrefix(v.Name, podpaths.ExclusionVolumePrefix) {
				used[v.Name] = true
			}
		}
		for _, c := range pod.Spec.Containers {
			if c.Name != ScannerContainer {
				continue
			}
			for _, m := range c.VolumeMounts {
				// A hostPath at the cache directory replaces the pod's own.
				if m.MountPath != ScannerCacheDir && podpaths.ReservedScannerMount(m.MountPath) == "" {
					t.Errorf("%s: the scanner mounts %s at %s, which is not reserved", name, m.Name, m.MountPath)
				}
			}
		}
	}
	var got []string
	for n := range used {
		got = append(got, n)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(podpaths.PodVolumes()))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reserved names the pods do not use, or the reverse (-want +got):\n%s", diff)
	}
}

// TestReservedNameBreaksThePod: what the configuration refuses is what
// would have made the pod invalid. A scanner volume of each reserved name,
// let through, gives the scheduled pod two volumes of that name, which the
// API server refuses.
func TestReservedNameBreaksThePod(t *testing.T) {
	for _, name := range podpaths.PodVolumes() {
		c := cfg(t, "manager: {runtime: {name: crio}, leftovers: {reclaim: [orphan-container]}, retention: {highThresholdPercent: 85, lowThresholdPercent: 80, registryCheck: {credentialsSecret: creds}}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true}}")
		c.Components.Scanner.Volumes = []corev1.Volume{{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}}}
		pod, err := Build(Params{References: testRefs, Job: "s", Kind: KindCollector, Node: "n", OS: podpaths.Linux, ConfigMap: "s", ConfigKey: "c.yaml", Config: c})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, v := range pod.Spec.Volumes {
			if v.Name == name {
				n++
			}
		}
		// imagelist is a manual job's only: reserved so that a name never
		// means two things, but it does not collide in a scheduled pod.
		if want := 2; name != podpaths.VolumeImageList && n != want {
			t.Errorf("%s: %d volumes of that name, want %d (a duplicate the API server refuses)", name, n, want)
		}
	}
}
