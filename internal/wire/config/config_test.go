package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

var cmpQuantity = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

// fullConfig is what each testdata/*-full.yaml says, in the internal form.
func fullConfig(apiVersion string) *Config {
	cfg := &Config{
		APIVersion: apiVersion,
		Manager: Manager{
			Runtime:      Runtime{Name: RuntimeCrio, Address: "unix:///run/crio/crio.sock", WindowsAddress: DefaultWindowsAddress},
			OTLPEndpoint: "otel-collector.monitoring:4318",
			LogLevel:     "debug",
			Scheduling:   Scheduling{RepeatInterval: 6 * time.Hour, CatchUpBatch: time.Minute, CatchUp: true},
			Profile:      Profile{Enabled: true, Port: 6061},
			ImageJob: ImageJob{SuccessRatio: 0.9, Cleanup: Cleanup{
				DelayOnSuccess: 5 * time.Minute, DelayOnFailure: time.Hour, KeepReportFor: 24 * time.Hour, MaxReportSize: 128 << 20,
			}, PodStartTimeout: 10 * time.Minute, PodRunTimeout: 24 * time.Hour, NodeWaitTimeout: 10 * time.Minute, MaxWorkerPods: DefaultMaxWorkerPods},
			PullSecrets:       []string{"regcred", "other-cred"},
			PriorityClassName: "system-node-critical",
			NodeFilter: NodeFilter{Type: FilterInclude, Selectors: []string{
				"node-role.kubernetes.io/worker", "pool in (a, b)",
			}},
			Retention: Retention{MinAge: workerdefaults.MinAge, CoolDown: workerdefaults.CoolDown, ImageFsPath: "/var/lib/containers/storage"},
		},
		Components: Components{
			Collector: Component{
				Enabled: true,
				Image:   Image{Repo: "registry.example.com/eraser/collector", Tag: "v9"},
				Request: Resources{Mem: q("30Mi"), CPU: q("10m")},
				Limit:   Resources{Mem: q("600Mi")},
			},
			Scanner: Component{
				Enabled: true,
				Image:   Image{Repo: "registry.example.com/eraser/scanner", Tag: "v9"},
				Request: Resources{Mem: q("1Gi"), CPU: q("500m")},
				Limit:   Resources{Mem: q("3Gi")},
				Config:  "deleteFailedImages: false\n",
			},
			Remover: Component{
				Enabled: true,
				Image:   Image{Repo: "registry.example.com/eraser/remover", Tag: "v9"},
				Request: Resources{Mem: q("40Mi"), CPU: q("1")},
				Limit:   Resources{Mem: q("100Mi")},
			},
		},
	}
	if apiVersion == VersionV1alpha3 {
		cfg.Manager.Runtime.Address = "unix:///var/run/crio/custom.sock"
		cfg.Manager.AdditionalPodLabels = map[string]string{"team": "platform", "example.com/cost-center": "42"}
		cfg.Components.Scanner.Volumes = []corev1.Volume{{
			Name: "trivy-db",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/var/lib/trivy-db", Type: ptr(corev1.HostPathDirectory),
			}},
		}}
	}
	return cfg
}

func ptr[T any](v T) *T { return &v }

// defaults is the expected Default(), spelled out: upstream's code defaults
// with our image repository.
func defaults(apiVersion string) *Config {
	return &Config{
		APIVersion: apiVersion,
		Manager: Manager{
			Runtime:    Runtime{Name: RuntimeContainerd, Address: "unix:///run/containerd/containerd.sock", WindowsAddress: DefaultWindowsAddress},
			LogLevel:   "info",
			Scheduling: Scheduling{RepeatInterval: 24 * time.Hour, BeginImmediately: true, CatchUpBatch: time.Minute, CatchUp: true},
			Profile:    Profile{Port: 6060},
			ImageJob: ImageJob{SuccessRatio: 1, Cleanup: Cleanup{DelayOnFailure: 24 * time.Hour, KeepReportFor: 24 * time.Hour, MaxReportSize: 128 << 20},
				PodStartTimeout: 10 * time.Minute, PodRunTimeout: 24 * time.Hour, NodeWaitTimeout: 10 * time.Minute, MaxWorkerPods: DefaultMaxWorkerPods},
			NodeFilter: NodeFilter{Type: FilterExclude, Selectors: []string{CleanupFilterLabel}},
			Retention:  Retention{MinAge: 10 * time.Minute, CoolDown: workerdefaults.CoolDown, ImageFsPath: "/var/lib/containerd"},
		},
		Components: Components{
			Collector: Component{
				Image:   Image{Repo: version.DefaultRepo + "/collector", Tag: version.Version},
				Request: Resources{Mem: q("25Mi"), CPU: q("7m")},
				Limit:   Resources{Mem: q("500Mi")},
			},
			Scanner: Component{
				Image:   Image{Repo: version.DefaultRepo + "/eraser-trivy-scanner", Tag: version.Version},
				Request: Resources{Mem: q("256Mi"), CPU: q("100m")},
				Limit:   Resources{Mem: q("2Gi")},
				Trivy:   ptr(scanconfig.DefaultConfig()),
			},
			Remover: Component{
				Enabled: true,
				Image:   Image{Repo: version.DefaultRepo + "/remover", Tag: version.Version},
				Request: Resources{Mem: q("25Mi"), CPU: q("7m")},
				Limit:   Resources{Mem: q("64Mi")},
			},
		},
	}
}

func TestParseFullDocuments(t *testing.T) {
	cases := map[string]struct {
		file string
		want *Config
	}{
		"v1alpha1": {file: "v1alpha1-full.yaml", want: fullConfig(VersionV1alpha1)},
		"v1alpha2": {file: "v1alpha2-full.yaml", want: fullConfig(VersionV1alpha2)},
		"v1alpha3": {file: "v1alpha3-full.yaml", want: fullConfig(VersionV1alpha3)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, warnings, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(warnings) != 0 {
				t.Errorf("unexpected warnings: %q", warnings)
			}
			if diff := cmp.Diff(tc.want, got, cmpQuantity); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaulting checks upstream's merge semantics: a document is applied
// onto the defaults; missing keys keep them, lists replace, maps merge.
func TestDefaulting(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want func(*Config)
	}{
		"v1alpha1 empty": {doc: "apiVersion: eraser.sh/v1alpha1", want: func(c *Config) { c.APIVersion = VersionV1alpha1 }},
		"v1alpha2 empty": {doc: "apiVersion: eraser.sh/v1alpha2", want: func(c *Config) { c.APIVersion = VersionV1alpha2 }},
		"v1alpha3 empty": {doc: "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig", want: func(*Config) {}},
		"empty sections keep defaults": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {}, profile: {}, imageJob: {cleanup: {}}}\ncomponents: {collector: {request: {}, limit: {}}}",
			want: func(*Config) {},
		},
		"one key in a section": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {cleanup: {delayOnSuccess: 1m}}}",
			want: func(c *Config) { c.Manager.ImageJob.Cleanup.DelayOnSuccess = time.Minute },
		},
		"lists replace": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {nodeFilter: {selectors: [kubernetes.io/os=windows]}}",
			want: func(c *Config) { c.Manager.NodeFilter.Selectors = []string{"kubernetes.io/os=windows"} },
		},
		"only the image tag": {
			doc:  "apiVersion: eraser.sh/v1alpha3\ncomponents: {remover: {image: {tag: v2}}}",
			want: func(c *Config) { c.Components.Remover.Image.Tag = "v2" },
		},
		"cpu 0 means unset": {
			doc:  "apiVersion: eraser.sh/v1alpha3\ncomponents: {remover: {request: {cpu: 0}}}",
			want: func(c *Config) { c.Components.Remover.Request.CPU = nil },
		},
		"numeric quantity": {
			doc:  "apiVersion: eraser.sh/v1alpha3\ncomponents: {remover: {request: {cpu: 2}}}",
			want: func(c *Config) { c.Components.Remover.Request.CPU = q("2") },
		},
		"v1alpha3 runtime name only": {
			doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: dockershim}}",
			want: func(c *Config) {
				c.Manager.Runtime = Runtime{Name: RuntimeDockershim, Address: "unix:///run/dockershim.sock", WindowsAddress: DefaultWindowsAddress}
				c.Manager.Retention.ImageFsPath = "/var/lib/docker"
			},
		},
		"v1alpha3 empty runtime": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {}}",
			want: func(*Config) {},
		},
		"v1alpha3 custom socket": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, address: 'unix:///fake/socket/address.sock'}}",
			want: func(c *Config) { c.Manager.Runtime.Address = "unix:///fake/socket/address.sock" },
		},
		"windows address and images": {
			doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, windowsAddress: 'npipe:////./pipe/custom'}}\ncomponents: {remover: {windows: {image: {repo: r/remover-win, tag: 1}, command: [remover.exe, --verbose]}}}",
			want: func(c *Config) {
				c.Manager.Runtime.WindowsAddress = "npipe://./pipe/custom"
				c.Components.Remover.Windows = WindowsComponent{Image: Image{Repo: "r/remover-win", Tag: "1"}, Command: []string{"remover.exe", "--verbose"}}
			},
		},
		"v1alpha3 named pipe": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, address: 'npipe:////./pipe/containerd-containerd'}}",
			want: func(c *Config) { c.Manager.Runtime.Address = "npipe://./pipe/containerd-containerd" },
		},
		"v1alpha2 runtime name": {
			doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {runtime: crio}",
			want: func(c *Config) {
				c.APIVersion = VersionV1alpha2
				c.Manager.Runtime = Runtime{Name: RuntimeCrio, Address: "unix:///run/crio/crio.sock", WindowsAddress: DefaultWindowsAddress}
				c.Manager.Retention.ImageFsPath = "/var/lib/containers/storage"
			},
		},
		"v1alpha1 remover is eraser": {
			doc: "apiVersion: eraser.sh/v1alpha1\ncomponents: {eraser: {image: {repo: example.com/old-eraser}}}",
			want: func(c *Config) {
				c.APIVersion = VersionV1alpha1
				c.Components.Remover.Image.Repo = "example.com/old-eraser"
			},
		},
		"zero delays": {
			doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {cleanup: {delayOnSuccess: 0, delayOnFailure: 0s}}}",
			want: func(c *Config) {
				c.Manager.ImageJob.Cleanup = Cleanup{KeepReportFor: 24 * time.Hour, MaxReportSize: 128 << 20}
			},
		},
		"waves as count": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxConcurrentNodes: 50}}",
			want: func(c *Config) { c.Manager.ImageJob.MaxConcurrentNodes = MaxConcurrent{Count: 50} },
		},
		"waves as percent": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {maxConcurrentNodes: 10%}}",
			want: func(c *Config) { c.Manager.ImageJob.MaxConcurrentNodes = MaxConcurrent{Percent: 10} },
		},
		"timeouts and cron": {
			doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {cron: '0 3 * * *'}, imageJob: {podStartTimeout: 2m, podRunTimeout: 1h}}",
			want: func(c *Config) {
				c.Manager.Scheduling.Cron = "0 3 * * *"
				c.Manager.ImageJob.PodStartTimeout, c.Manager.ImageJob.PodRunTimeout = 2*time.Minute, time.Hour
			},
		},
		"node wait timeout": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {nodeWaitTimeout: 30m}}",
			want: func(c *Config) { c.Manager.ImageJob.NodeWaitTimeout = 30 * time.Minute },
		},
		"scheduled dry run": {
			doc:  "apiVersion: eraser.sh/v1alpha1\nmanager: {scheduling: {dryRun: true}}",
			want: func(c *Config) { c.APIVersion, c.Manager.Scheduling.DryRun = VersionV1alpha1, true },
		},
		"node selector and tolerations": {
			doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {nodeSelector: {pool: gpu, example.com/eraser: ''}, tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}, {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}]}}",
			want: func(c *Config) {
				c.Manager.ImageJob.NodeSelector = map[string]string{"pool": "gpu", "example.com/eraser": ""}
				c.Manager.ImageJob.Tolerations = []corev1.Toleration{
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
					{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](300)},
				}
			},
		},
		"v1alpha1 node selector and tolerations": {
			doc: "apiVersion: eraser.sh/v1alpha1\nmanager: {imageJob: {nodeSelector: {pool: gpu}, tolerations: [{operator: Exists}]}}",
			want: func(c *Config) {
				c.APIVersion = VersionV1alpha1
				c.Manager.ImageJob.NodeSelector = map[string]string{"pool": "gpu"}
				c.Manager.ImageJob.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			},
		},
		"v1alpha2 node selector and tolerations": {
			doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {imageJob: {nodeSelector: {pool: gpu}, tolerations: [{key: dedicated}]}}",
			want: func(c *Config) {
				c.APIVersion = VersionV1alpha2
				c.Manager.ImageJob.NodeSelector = map[string]string{"pool": "gpu"}
				c.Manager.ImageJob.Tolerations = []corev1.Toleration{{Key: "dedicated"}}
			},
		},
		// An empty list is not unset: the pods tolerate no taint at all.
		"no tolerations": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {tolerations: []}}",
			want: func(c *Config) { c.Manager.ImageJob.Tolerations = []corev1.Toleration{} },
		},
		"null tolerations tolerate everything": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {tolerations: null, nodeSelector: {}}}",
			want: func(c *Config) { c.Manager.ImageJob.NodeSelector = map[string]string{} },
		},
		"ratio bounds": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {successRatio: 0}}",
			want: func(c *Config) { c.Manager.ImageJob.SuccessRatio = 0 },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := defaults(VersionV1alpha3)
			tc.want(want)
			if diff := cmp.Diff(want, got, cmpQuantity); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultMatchesUpstreamCodeDefaults(t *testing.T) {
	if diff := cmp.Diff(defaults(VersionV1alpha3), Default(), cmpQuantity); diff != "" {
		t.Errorf("Default() (-want +got):\n%s", diff)
	}
}
