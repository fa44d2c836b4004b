package podspec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestBuildRetention: the retention policy reaches the collector and remover
// as the flags the workers parse, with the host directories it needs and no
// others; the scanner gets none of it, but for CRI-O's image store, which
// it scans.
func TestBuildRetention(t *testing.T) {
	const all = "manager: {retention: {minAge: 1h30m, unusedFor: 720h, highThresholdPercent: 85, lowThresholdPercent: 80}}\n" +
		"components: {collector: {enabled: true}, scanner: {enabled: true}}"
	state := "eraser-state=/var/lib/eraser(DirectoryOrCreate)"
	stateMount := "eraser-state:/var/lib/eraser:rw"
	cases := map[string]struct {
		kind Kind
		os   podpaths.OS
		doc  string
		want retentionShape
	}{
		"manual, defaults": {
			kind: KindManual, os: podpaths.Linux,
			want: retentionShape{
				Args:    map[string][]string{"remover": {"--min-age=10m0s"}},
				Mounts:  map[string][]string{"remover": {stateMount}},
				Volumes: []string{state},
			},
		},
		"manual ignores the scheduled policies": {
			kind: KindManual, os: podpaths.Linux, doc: all,
			want: retentionShape{
				Args:    map[string][]string{"remover": {"--min-age=1h30m0s"}},
				Mounts:  map[string][]string{"remover": {stateMount}},
				Volumes: []string{state},
			},
		},
		"scheduled, defaults": {
			kind: KindCollector, os: podpaths.Linux, doc: "components: {collector: {enabled: true}}",
			want: retentionShape{
				Args:    map[string][]string{"collector": {"--min-age=10m0s"}, "remover": {"--min-age=10m0s"}},
				Mounts:  map[string][]string{"collector": {stateMount}, "remover": {stateMount}},
				Volumes: []string{state},
			},
		},
		"scheduled, unusedFor only": {
			kind: KindCollector, os: podpaths.Linux, doc: "manager: {retention: {unusedFor: 168h}}",
			want: retentionShape{
				Args: map[string][]string{
					"collector": {"--min-age=10m0s", "--unused-for=168h0m0s"},
					"remover":   {"--min-age=10m0s", "--unused-for=168h0m0s"},
				},
				Mounts:  map[string][]string{"collector": {stateMount}, "remover": {stateMount}},
				Volumes: []string{state},
			},
		},
		"scheduled, keepVersions and a cool-down of its own": {
			kind: KindCollector, os: podpaths.Linux, doc: "manager: {retention: {keepVersions: 2, coolDown: 2h}}",
			want: retentionShape{
				Args: map[string][]string{
					"collector": {"--min-age=10m0s", "--keep-versions=2", "--cool-down=2h0m0s"},
					"remover":   {"--min-age=10m0s", "--keep-versions=2", "--cool-down=2h0m0s"},
				},
				Mounts:  map[string][]string{"collector": {stateMount}, "remover": {stateMount}},
				Volumes: []string{state},
			},
		},
		"manual: the cool-down, not keepVersions": {
			kind: KindManual, os: podpaths.Linux, doc: "manager: {retention: {keepVersions: 2, coolDown: 0s}}",
			want: retentionShape{
				Args:    map[string][]string{"remover": {"--min-age=10m0s", "--cool-down=0s"}},
				Mounts:  map[string][]string{"remover": {stateMount}},
				Volumes: []string{state},
			},
		},
		"scheduled, every policy, scanner untouched": {
			kind: KindCollector, os: podpaths.Linux, doc: all,
			want: retentionShape{
				Args: map[string][]string{
					"collector": {"--min-age=1h30m0s", "--unused-for=720h0m0s", "--high-threshold-percent=85", "--low-threshold-percent=80", "--imagefs-path=/var/lib/containerd"},
					"remover":   {"--min-age=1h30m0s", "--unused-for=720h0m0s", "--high-threshold-percent=85", "--low-threshold-percent=80", "--imagefs-path=/var/lib/containerd"},
				},
				Mounts: map[string][]string{
					"collector": {stateMount},
					"remover":   {stateMount, "imagefs:/var/lib/containerd:ro"},
				},
				Volumes: []string{state, "imagefs=/var/lib/containerd(Directory)"},
			},
		},
		"scheduled, thresholds on CRI-O at a set path": {
			kind: KindCollector, os: podpaths.Linux,
			doc: "manager: {runtime: {name: crio}, retention: {highThresholdPercent: 90, lowThresholdPercent: 50, imageFsPath: /data/storage}}",
			want: retentionShape{
				Args: map[string][]string{
					"collector": {"--min-age=10m0s", "--high-threshold-percent=90", "--low-threshold-percent=50", "--imagefs-path=/data/storage", "--image-store=/data/storage"},
					"remover":   {"--min-age=10m0s", "--high-threshold-percent=90", "--low-threshold-percent=50", "--imagefs-path=/data/storage", "--image-store=/data/storage"},
				},
				Mounts: map[string][]string{
					"collector": {stateMount},
					"remover":   {stateMount, "imagefs:/data/storage:ro"},
				},
				Volumes: []string{state, "imagefs=/data/storage(Directory)"},
			},
		},
		"scheduled scan on CRI-O: the scanner reads the image store, read-only, and not the node's state": {
			kind: KindCollector, os: podpaths.Linux, doc: "manager: {runtime: {name: crio}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true}}",
			want: retentionShape{
				Args: map[string][]string{
					"collector":     {"--min-age=10m0s", "--image-store=/var/lib/containers/storage"},
					"remover":       {"--min-age=10m0s", "--image-store=/var/lib/containers/storage"},
					"trivy-scanner": {"--image-store=/var/lib/containers/storage"},
				},
				Mounts: map[string][]string{
					"collector":     {stateMount},
					"remover":       {stateMount, "imagefs:/var/lib/containers/storage:ro"},
					"trivy-scanner": {"imagefs:/var/lib/containers/storage:ro"},
				},
				Volumes: []string{state, "imagefs=/var/lib/containers/storage(Directory)"},
			},
		},
		"ImageList on CRI-O: its image store, read-only, for image ages": {
			kind: KindManual, os: podpaths.Linux, doc: "manager: {runtime: {name: crio}}",
			want: retentionShape{
				Args:    map[string][]string{"remover": {"--min-age=10m0s", "--image-store=/var/lib/containers/storage"}},
				Mounts:  map[string][]string{"remover": {stateMount, "imagefs:/var/lib/containers/storage:ro"}},
				Volumes: []string{state, "imagefs=/var/lib/containers/storage(Directory)"},
			},
		},
		"windows manual": {
			kind: KindManual, os: podpaths.Windows, doc: all,
			want: retentionShape{Args: map[string][]string{"remover": {"--min-age=1h30m0s"}}},
		},
		"windows scheduled: no path, no volumes": {
			kind: KindCollector, os: podpaths.Windows, doc: all,
			want: retentionShape{Args: map[string][]string{
				"collector": {"--min-age=1h30m0s", "--unused-for=720h0m0s", "--high-threshold-percent=85", "--low-threshold-percent=80"},
				"remover":   {"--min-age=1h30m0s", "--unused-for=720h0m0s", "--high-threshold-percent=85", "--low-threshold-percent=80"},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			params := Params{References: testRefs, Job: "j", Kind: tc.kind, Node: "n", OS: tc.os, ConfigMap: "j", ConfigKey: "c.yaml", LogLevel: "info", Config: cfg(t, tc.doc)}
			pod, err := Build(params)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, retentionShapeOf(pod), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tc.os == podpaths.Linux {
				checkInvariants(t, pod, params)
			}
		})
	}
}

// retentionShape is the retention policy's part of a pod.
type retentionShape struct {
	Args    map[string][]string
	Mounts  map[string][]string
	Volumes []string
}

var retentionFlags = []string{"--min-age=", "--unused-for=", "--keep-versions=", "--cool-down=", "--high-threshold-percent=", "--low-threshold-percent=", "--imagefs-path=", "--image-store="}

func retentionShapeOf(p *corev1.Pod) retentionShape {
	s := retentionShape{Args: map[string][]string{}, Mounts: map[string][]string{}}
	for _, c := range p.Spec.Containers {
		for _, a := range c.Args {
			for _, f := range retentionFlags {
				if strings.HasPrefix(a, f) {
					s.Args[c.Name] = append(s.Args[c.Name], a)
				}
			}
		}
		for _, m := range c.VolumeMounts {
			if m.Name == volState || m.Name == volImageFs {
				mode := "rw"
				if m.ReadOnly {
					mode = "ro"
				}
				s.Mounts[c.Name] = append(s.Mounts[c.Name], m.Name+":"+m.MountPath+":"+mode)
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == volState || v.Name == volImageFs {
			s.Volumes = append(s.Volumes, v.Name+"="+v.HostPath.Path+"("+string(*v.HostPath.Type)+")")
		}
	}
	return s
}
