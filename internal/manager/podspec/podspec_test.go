package podspec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

func cfg(t *testing.T, doc string) *config.Config {
	t.Helper()
	c, _, err := config.Parse([]byte("apiVersion: eraser.sh/v1alpha3\n" + doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shape is what the tests compare: the parts of a pod that carry meaning.
type shape struct {
	Containers []string
	Args       map[string]string
	Mounts     map[string][]string
	Volumes    []string
	Labels     map[string]string
	Pull       []string
	Priority   string
	Limits     map[string]string
}

func shapeOf(p *corev1.Pod) shape {
	s := shape{Args: map[string]string{}, Mounts: map[string][]string{}, Labels: p.Labels, Priority: p.Spec.PriorityClassName, Limits: map[string]string{}}
	for _, c := range p.Spec.Containers {
		s.Containers = append(s.Containers, c.Name+"="+c.Image)
		s.Args[c.Name] = strings.Join(c.Args, " ")
		for _, m := range c.VolumeMounts {
			s.Mounts[c.Name] = append(s.Mounts[c.Name], m.Name+":"+m.MountPath)
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			s.Limits[c.Name] = q.String()
		}
	}
	for _, v := range p.Spec.Volumes {
		s.Volumes = append(s.Volumes, v.Name)
	}
	for _, ps := range p.Spec.ImagePullSecrets {
		s.Pull = append(s.Pull, ps.Name)
	}
	return s
}

func TestBuild(t *testing.T) {
	cases := map[string]struct {
		params Params
		want   shape
	}{
		"manual": {
			params: Params{References: testRefs, Job: "j", Kind: KindManual, Node: "n1", OS: podpaths.Linux, Namespace: "eraser-system", ConfigMap: "j", ConfigKey: "c.yaml",
				Config: cfg(t, "components: {remover: {image: {repo: r/remover, tag: v1}}}"), LogLevel: "info", Exclusions: []string{"keep"}},
			want: shape{
				Containers: []string{"remover=r/remover:v1"},
				Args:       map[string]string{"remover": "--imagelist=/run/eraser.sh/imagelist/images --log-level=info --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s --keep-not-repullable=true --remove-vulnerable-referenced=true --references-dir=/run/eraser.sh/references --registry-check=true --run=j"},
				Mounts: map[string][]string{"remover": {"runtime-sock-volume:/run/cri/cri.sock", "exclude-keep:/run/eraser.sh/exclusions/exclude-keep",
					"imagelist:/run/eraser.sh/imagelist", "eraser-state:/var/lib/eraser", "node-references:/run/eraser.sh/references/node", "cluster-references:/run/eraser.sh/references/cluster"}},
				Volumes: []string{"runtime-sock-volume", "exclude-keep", "imagelist", "eraser-state", "node-references", "cluster-references"},
				Labels:  map[string]string{LabelType: "manual", LabelJob: "j", LabelBatch: "0"},
				Limits:  map[string]string{"remover": "64Mi"},
			},
		},
		"manual dry run with extras": {
			params: Params{References: testRefs, Job: "j", Kind: KindManual, Node: "n1", OS: podpaths.Linux, ConfigMap: "j", LogLevel: "debug", DryRun: true,
				Config: cfg(t, "manager: {pullSecrets: [reg], priorityClassName: low, additionalPodLabels: {team: a}}\ncomponents: {remover: {image: {repo: r, tag: t}}}")},
			want: shape{
				Containers: []string{"remover=r:t"},
				Args:       map[string]string{"remover": "--imagelist=/run/eraser.sh/imagelist/images --log-level=debug --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s --keep-not-repullable=true --remove-vulnerable-referenced=true --references-dir=/run/eraser.sh/references --registry-check=true --dry-run --run=j"},
				Mounts:     map[string][]string{"remover": {"runtime-sock-volume:/run/cri/cri.sock", "imagelist:/run/eraser.sh/imagelist", "eraser-state:/var/lib/eraser", "node-references:/run/eraser.sh/references/node", "cluster-references:/run/eraser.sh/references/cluster"}},
				Volumes:    []string{"runtime-sock-volume", "imagelist", "eraser-state", "node-references", "cluster-references"},
				Labels:     map[string]string{LabelType: "manual", LabelJob: "j", LabelBatch: "0", "team": "a"},
				Pull:       []string{"reg"}, Priority: "low",
				Limits: map[string]string{"remover": "64Mi"},
			},
		},
		"scheduled with scanner": {
			params: Params{References: testRefs, Job: "s", Kind: KindCollector, Node: "n1", OS: podpaths.Linux, ConfigMap: "s", ConfigKey: "c.yaml", LogLevel: "info",
				Config: cfg(t, "components: {collector: {enabled: true, image: {repo: c, tag: 1}}, scanner: {enabled: true, image: {repo: s, tag: 1}, volumes: [{name: db, hostPath: {path: /var/db}}, {name: tmp, emptyDir: {}}]}, remover: {image: {repo: r, tag: 1}}}")},
			want: shape{
				Containers: []string{"collector=c:1", "remover=r:1", "trivy-scanner=s:1"},
				Args: map[string]string{
					"collector":     "--scan-disabled=false --handoff-timeout=24h0m0s --log-level=info --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s",
					"remover":       "--scanner=enabled --handoff-timeout=24h0m0s --log-level=info --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s --keep-not-repullable=true --remove-vulnerable-referenced=true --references-dir=/run/eraser.sh/references --registry-check=true --run=s",
					"trivy-scanner": "--config=/run/eraser.sh/config/c.yaml --log-level=info --enable-pprof=false --pprof-port=6060",
				},
				Mounts: map[string][]string{
					"collector":     {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-state:/var/lib/eraser"},
					"remover":       {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-state:/var/lib/eraser", "node-references:/run/eraser.sh/references/node", "cluster-references:/run/eraser.sh/references/cluster"},
					"trivy-scanner": {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-config:/run/eraser.sh/config", "db:/var/db", "scanner-cache:/var/lib/trivy", "scanner-tmp:/tmp"},
				},
				Volumes: []string{"runtime-sock-volume", "shared-data", "eraser-state", "node-references", "cluster-references", "eraser-config", "db", "scanner-cache", "scanner-tmp"},
				Labels:  map[string]string{LabelType: "collector", LabelJob: "s", LabelBatch: "0"},
				Limits:  map[string]string{"collector": "500Mi", "remover": "64Mi", "trivy-scanner": "2Gi"},
			},
		},
		"scheduled with scanner and a pre-seeded DB on the node": {
			params: Params{References: testRefs, Job: "s", Kind: KindCollector, Node: "n1", OS: podpaths.Linux, ConfigMap: "s", ConfigKey: "c.yaml", LogLevel: "info",
				Config: cfg(t, "components: {collector: {enabled: true, image: {repo: c, tag: 1}}, scanner: {enabled: true, image: {repo: s, tag: 1}, volumes: [{name: seeded, hostPath: {path: /var/lib/trivy}}]}, remover: {image: {repo: r, tag: 1}}}")},
			want: shape{
				Containers: []string{"collector=c:1", "remover=r:1", "trivy-scanner=s:1"},
				Args: map[string]string{
					"collector":     "--scan-disabled=false --handoff-timeout=24h0m0s --log-level=info --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s",
					"remover":       "--scanner=enabled --handoff-timeout=24h0m0s --log-level=info --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s --keep-not-repullable=true --remove-vulnerable-referenced=true --references-dir=/run/eraser.sh/references --registry-check=true --run=s",
					"trivy-scanner": "--config=/run/eraser.sh/config/c.yaml --log-level=info --enable-pprof=false --pprof-port=6060",
				},
				Mounts: map[string][]string{
					"collector":     {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-state:/var/lib/eraser"},
					"remover":       {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-state:/var/lib/eraser", "node-references:/run/eraser.sh/references/node", "cluster-references:/run/eraser.sh/references/cluster"},
					"trivy-scanner": {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-config:/run/eraser.sh/config", "seeded:/var/lib/trivy", "scanner-tmp:/tmp"},
				},
				Volumes: []string{"runtime-sock-volume", "shared-data", "eraser-state", "node-references", "cluster-references", "eraser-config", "seeded", "scanner-tmp"},
				Labels:  map[string]string{LabelType: "collector", LabelJob: "s", LabelBatch: "0"},
				Limits:  map[string]string{"collector": "500Mi", "remover": "64Mi", "trivy-scanner": "2Gi"},
			},
		},
		"scheduled without scanner": {
			params: Params{References: testRefs, Job: "s", Kind: KindCollector, Node: "n1", OS: podpaths.Linux, ConfigMap: "s", LogLevel: "info",
				Config: cfg(t, "components: {collector: {enabled: true, image: {repo: c, tag: 1}}, remover: {image: {repo: r, tag: 1}}}")},
			want: shape{
				Containers: []string{"collector=c:1", "remover=r:1"},
				Args: map[string]string{
					"collector": "--scan-disabled=true --handoff-timeout=1h0m0s --log-level=info --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s",
					"remover":   "--scanner=disabled --handoff-timeout=1h0m0s --log-level=info --exclusion-dir=/run/eraser.sh/exclusions --enable-pprof=false --pprof-port=6060 --min-age=10m0s --keep-not-repullable=true --remove-vulnerable-referenced=true --references-dir=/run/eraser.sh/references --registry-check=true --run=s",
				},
				Mounts: map[string][]string{
					"collector": {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-state:/var/lib/eraser"},
					"remover":   {"runtime-sock-volume:/run/cri/cri.sock", "shared-data:/run/eraser.sh/shared-data", "eraser-state:/var/lib/eraser", "node-references:/run/eraser.sh/references/node", "cluster-references:/run/eraser.sh/references/cluster"},
				},
				Volumes: []string{"runtime-sock-volume", "shared-data", "eraser-state", "node-references", "cluster-references"},
				Labels:  map[string]string{LabelType: "collector", LabelJob: "s", LabelBatch: "0"},
				Limits:  map[string]string{"collector": "500Mi", "remover": "64Mi"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, err := Build(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, shapeOf(pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkInvariants(t, pod, tc.params)
		})
	}
}

// checkInvariants: what every worker pod must be, whatever the config.
func checkInvariants(t *testing.T, pod *corev1.Pod, p Params) {
	t.Helper()
	s := pod.Spec
	if s.NodeName != p.Node || s.RestartPolicy != corev1.RestartPolicyNever || s.ServiceAccountName != ServiceAccount {
		t.Errorf("pod basics: node %q restart %q sa %q", s.NodeName, s.RestartPolicy, s.ServiceAccountName)
	}
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Error("a service account token is mounted")
	}
	if set := p.Config.Manager.ImageJob.Tolerations; set != nil {
		if diff := cmp.Diff(set, s.Tolerations, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("tolerations, want exactly the configured ones (-want +got):\n%s", diff)
		}
	} else if len(s.Tolerations) != 1 || s.Tolerations[0] != (corev1.Toleration{Operator: corev1.TolerationOpExists}) {
		t.Errorf("tolerations %+v, want tolerate-all", s.Tolerations)
	}
	if ref := pod.OwnerReferences; len(ref) != 1 || ref[0].Kind != "ImageJob" || ref[0].Name != p.Job {
		t.Errorf("owner %+v", ref)
	}
	for _, v := range s.Volumes {
		// What a container writes to an unbounded emptyDir could fill the
		// node's disk (or, in memory, its memory).
		if v.EmptyDir != nil && p.OS == podpaths.Linux && v.EmptyDir.SizeLimit == nil {
			t.Errorf("emptyDir %s has no sizeLimit", v.Name)
		}
	}
	for _, c := range s.Containers {
		sc := c.SecurityContext
		if sc == nil || *sc.AllowPrivilegeEscalation || *sc.Privileged || !*sc.ReadOnlyRootFilesystem ||
			len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s is not hardened: %+v", c.Name, sc)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			t.Errorf("container %s has a CPU limit", c.Name)
		}
		if c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("container %s lacks NODE_NAME", c.Name)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	c := cfg(t, "")
	if _, err := Build(Params{References: testRefs, Job: "j", Kind: KindManual, Node: "w", OS: "plan9", Config: c}); err == nil {
		t.Error("built a pod for an OS without workers")
	}
	pipe := cfg(t, "manager: {runtime: {name: containerd, address: 'npipe://./pipe/x'}}")
	if _, err := Build(Params{References: testRefs, Job: "j", Kind: KindManual, Node: "n", OS: podpaths.Linux, Config: pipe}); err == nil {
		t.Error("a named pipe mounted into a Linux pod")
	}
}

// TestBuildTolerations: configured tolerations replace tolerate-all, on
// Linux and Windows pods alike; unset keeps upstream's tolerate-all.
func TestBuildTolerations(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want []corev1.Toleration
	}{
		"unset tolerates all": {
			want: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		"exactly the configured ones": {
			doc: "manager: {imageJob: {tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}, {key: maintenance, operator: Exists, effect: NoExecute, tolerationSeconds: 60}]}}",
			want: []corev1.Toleration{
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
			},
		},
		"an empty list tolerates nothing": {
			doc:  "manager: {imageJob: {tolerations: []}}",
			want: nil,
		},
	}
	for name, tc := range cases {
		for _, os := range []podpaths.OS{podpaths.Linux, podpaths.Windows} {
			t.Run(name+"/"+string(os), func(t *testing.T) {
				params := Params{References: testRefs, Job: "j", Kind: KindManual, Node: "n", OS: os, Namespace: "eraser-system", Config: cfg(t, tc.doc), ConfigMap: "j", LogLevel: "info"}
				pod, err := Build(params)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, pod.Spec.Tolerations, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("tolerations (-want +got):\n%s", diff)
				}
				// The pod owns its copy: the job's configuration is shared
				// by all of its pods.
				if len(pod.Spec.Tolerations) > 1 {
					*pod.Spec.Tolerations[1].TolerationSeconds = 1
					if got := *params.Config.Manager.ImageJob.Tolerations[1].TolerationSeconds; got != 60 {
						t.Errorf("changing the pod changed the configuration: %d", got)
					}
				}
			})
		}
	}
}

func TestPodName(t *testing.T) {
	long := strings.Repeat("n", 253)
	for _, node := range []string{"node-1", long} {
		name := PodName("imagejob-imagelist-abc123-g1", node)
		if len(name) > 253 || name != PodName("imagejob-imagelist-abc123-g1", node) {
			t.Errorf("PodName(%d-char node) = %d chars, or not deterministic", len(node), len(name))
		}
	}
	if PodName("j", "a") == PodName("j", "b") {
		t.Error("two nodes, one pod name")
	}
}

// testRefs name a wave's cluster set: every pod of a configuration that
// protects referenced images mounts one.
var testRefs = []string{"j-refs-0123456789abcdef-1"}

// TestHandoffTimeoutFollowsScan: the collector and the remover of a
// scheduled run wait for their peers as long as the configured scan may
// take, not the hour they were once capped at.
func TestHandoffTimeoutFollowsScan(t *testing.T) {
	const trivy = "components: {collector: {enabled: true}, scanner: {enabled: true, config: 'timeout: {total: %s}'}}"
	cases := map[string]string{
		"upstream's 23h total":       strings.Replace(trivy, "%s", "23h", 1),
		"a 47h total":                strings.Replace(trivy, "%s", "47h", 1),
		"a 2h total":                 strings.Replace(trivy, "%s", "2h", 1),
		"no total: the pod's bound":  strings.Replace(trivy, "%s", "0s", 1),
		"no scanner":                 "components: {collector: {enabled: true}, scanner: {enabled: false}}",
		"a custom scanner, 30h pods": "manager: {imageJob: {podRunTimeout: 30h}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true, image: {repo: example.com/mine}}}",
	}
	want := map[string]string{
		"upstream's 23h total":       "23h40m0s",
		"a 47h total":                "47h40m0s",
		"a 2h total":                 "2h40m0s",
		"no total: the pod's bound":  "24h0m0s",
		"no scanner":                 "1h0m0s",
		"a custom scanner, 30h pods": "30h0m0s",
	}
	got := map[string]string{}
	for name, doc := range cases {
		pod, err := Build(Params{References: testRefs, Job: "s", Kind: KindCollector, Node: "n1", OS: podpaths.Linux, ConfigMap: "s", ConfigKey: "c.yaml", LogLevel: "info", Config: cfg(t, doc)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pod.Spec.Containers {
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--handoff-timeout="); ok {
					if prev, seen := got[name]; seen && prev != v {
						t.Errorf("%s: the workers wait differently: %s and %s", name, prev, v)
					}
					got[name] = v
				}
			}
			if c.Name == ScannerContainer && strings.Contains(strings.Join(c.Args, " "), "--handoff-timeout") {
				t.Errorf("%s: the scanner got --handoff-timeout, which a custom scanner would refuse", name)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("--handoff-timeout (-want +got):\n%s", diff)
	}
}

// TestMountsPerContainer: each container mounts only what it uses, per
// runtime. The scanner parses tenants' images: on CRI-O it reads the image
// store from disk and holds no runtime socket; elsewhere it reads images
// through the socket. Exclusion lists are the collector's and the
// remover's; the image filesystem is the remover's.
func TestMountsPerContainer(t *testing.T) {
	const scan = "components: {collector: {enabled: true}, scanner: {enabled: true}}"
	cases := map[string]struct {
		kind Kind
		doc  string
	}{
		"containerd, scanning":   {kind: KindCollector, doc: scan},
		"CRI-O, scanning":        {kind: KindCollector, doc: "manager: {runtime: {name: crio}}\n" + scan},
		"CRI-O, reclaiming":      {kind: KindCollector, doc: "manager: {runtime: {name: crio}, leftovers: {reclaim: [orphan-container]}}\n" + scan},
		"CRI-O, an ImageList":    {kind: KindManual, doc: "manager: {runtime: {name: crio}}"},
		"cri-dockerd, a scanner": {kind: KindCollector, doc: "manager: {runtime: {name: dockershim}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true, image: {repo: example.com/my-scanner}}}"},
	}
	want := map[string]map[string][]string{
		"containerd, scanning": {
			"collector":     {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state"},
			"remover":       {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state", "node-references", "cluster-references"},
			"trivy-scanner": {"runtime-sock-volume", "shared-data", "eraser-config", "scanner-cache", "scanner-tmp"},
		},
		"CRI-O, scanning": {
			"collector":     {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state"},
			"remover":       {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state", "imagefs", "node-references", "cluster-references"},
			"trivy-scanner": {"shared-data", "eraser-config", "scanner-cache", "scanner-tmp", "imagefs"},
		},
		"CRI-O, reclaiming": {
			"collector":     {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state"},
			"remover":       {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state", "imagefs", "node-references", "cluster-references", "crio-run-root", "crio-config", "containers-config", "crio-pull-tmp"},
			"trivy-scanner": {"shared-data", "eraser-config", "scanner-cache", "scanner-tmp", "imagefs"},
		},
		"CRI-O, an ImageList": {
			"remover": {"runtime-sock-volume", "exclude-keep", "imagelist", "eraser-state", "imagefs", "node-references", "cluster-references"},
		},
		"cri-dockerd, a scanner": {
			"collector":     {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state"},
			"remover":       {"runtime-sock-volume", "exclude-keep", "shared-data", "eraser-state", "node-references", "cluster-references"},
			"trivy-scanner": {"runtime-sock-volume", "shared-data", "eraser-config", "scanner-cache", "scanner-tmp"},
		},
	}
	got := map[string]map[string][]string{}
	for name, tc := range cases {
		pod, err := Build(Params{References: testRefs, Job: "j", Kind: tc.kind, Node: "n", OS: podpaths.Linux, ConfigMap: "j", ConfigKey: "c.yaml",
			Exclusions: []string{"keep"}, Config: cfg(t, tc.doc)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = map[string][]string{}
		for _, c := range pod.Spec.Containers {
			for _, m := range c.VolumeMounts {
				got[name][c.Name] = append(got[name][c.Name], m.Name)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts per container (-want +got):\n%s", diff)
	}
}
