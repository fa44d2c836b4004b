package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eraser-oss/eraser/internal/version"
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
			Scheduling:   Scheduling{RepeatInterval: 6 * time.Hour},
			Profile:      Profile{Enabled: true, Port: 6061},
			ImageJob: ImageJob{SuccessRatio: 0.9, Cleanup: Cleanup{
				DelayOnSuccess: 5 * time.Minute, DelayOnFailure: time.Hour, KeepReportFor: 24 * time.Hour,
			}, PodStartTimeout: 10 * time.Minute, PodRunTimeout: 24 * time.Hour, MaxWorkerPods: DefaultMaxWorkerPods},
			PullSecrets:       []string{"regcred", "other-cred"},
			PriorityClassName: "system-node-critical",
			NodeFilter: NodeFilter{Type: FilterInclude, Selectors: []string{
				"node-role.kubernetes.io/worker", "pool in (a, b)",
			}},
			Retention: Retention{MinAge: DefaultMinAge, ImageFsPath: "/var/lib/containers/storage"},
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
			Scheduling: Scheduling{RepeatInterval: 24 * time.Hour, BeginImmediately: true},
			Profile:    Profile{Port: 6060},
			ImageJob: ImageJob{SuccessRatio: 1, Cleanup: Cleanup{DelayOnFailure: 24 * time.Hour, KeepReportFor: 24 * time.Hour},
				PodStartTimeout: 10 * time.Minute, PodRunTimeout: 24 * time.Hour, MaxWorkerPods: DefaultMaxWorkerPods},
			NodeFilter: NodeFilter{Type: FilterExclude, Selectors: []string{CleanupFilterLabel}},
			Retention:  Retention{MinAge: 10 * time.Minute, ImageFsPath: "/var/lib/containerd"},
		},
		Components: Components{
			Collector: Component{
				Image:   Image{Repo: version.DefaultRepo + "/collector", Tag: version.Version},
				Request: Resources{Mem: q("25Mi"), CPU: q("7m")},
				Limit:   Resources{Mem: q("500Mi")},
			},
			Scanner: Component{
				Image:   Image{Repo: version.DefaultRepo + "/eraser-trivy-scanner", Tag: version.Version},
				Request: Resources{Mem: q("500Mi"), CPU: q("1")},
				Limit:   Resources{Mem: q("2Gi")},
			},
			Remover: Component{
				Enabled: true,
				Image:   Image{Repo: version.DefaultRepo + "/remover", Tag: version.Version},
				Request: Resources{Mem: q("25Mi"), CPU: q("7m")},
				Limit:   Resources{Mem: q("30Mi")},
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
			doc:  "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {cleanup: {delayOnSuccess: 0, delayOnFailure: 0s}}}",
			want: func(c *Config) { c.Manager.ImageJob.Cleanup = Cleanup{KeepReportFor: 24 * time.Hour} },
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

// TestParseErrors: each invalid value is refused with its field path.
func TestParseErrors(t *testing.T) {
	v3 := func(body string) string { return "apiVersion: eraser.sh/v1alpha3\n" + body }
	cases := map[string]struct {
		doc  string
		want []string // substrings of the error
	}{
		"not yaml":               {doc: "apiVersion: [", want: []string{"not valid YAML"}},
		"not a mapping":          {doc: "- a\n- b", want: []string{"must be a YAML mapping"}},
		"missing apiVersion":     {doc: "kind: EraserConfig", want: []string{"apiVersion: Required value"}},
		"unknown apiVersion":     {doc: "apiVersion: eraser.sh/v1", want: []string{`apiVersion: Unsupported value: "eraser.sh/v1"`, "eraser.sh/v1alpha3"}},
		"wrong kind":             {doc: v3("kind: ConfigMap"), want: []string{`kind: Unsupported value: "ConfigMap"`}},
		"bad duration":           {doc: v3("manager: {scheduling: {repeatInterval: 1day}}"), want: []string{"manager.scheduling.repeatInterval", `"1day"`, "duration"}},
		"zero repeatInterval":    {doc: v3("manager: {scheduling: {repeatInterval: 0s}}"), want: []string{"manager.scheduling.repeatInterval", "greater than zero"}},
		"negative delay":         {doc: v3("manager: {imageJob: {cleanup: {delayOnFailure: -1h}}}"), want: []string{"manager.imageJob.cleanup.delayOnFailure", "negative"}},
		"bad quantity":           {doc: v3("components: {collector: {request: {mem: lots}}}"), want: []string{"components.collector.request.mem", `"lots"`, "quantity"}},
		"negative quantity":      {doc: v3("components: {scanner: {limit: {mem: -1Gi}}}"), want: []string{"components.scanner.limit.mem", "negative"}},
		"request over limit":     {doc: v3("components: {remover: {request: {mem: 1Gi}, limit: {mem: 30Mi}}}"), want: []string{"components.remover.request.mem", "must not exceed limit.mem 30Mi"}},
		"v1alpha1 eraser path":   {doc: "apiVersion: eraser.sh/v1alpha1\ncomponents: {eraser: {request: {mem: x}}}", want: []string{"components.eraser.request.mem"}},
		"tcp runtime address":    {doc: v3("manager: {runtime: {name: containerd, address: 'tcp://10.0.0.1:2375'}}"), want: []string{"manager.runtime.address", "tcp://", "local unix:// socket"}},
		"relative socket":        {doc: v3("manager: {runtime: {name: containerd, address: 'unix://run/x.sock'}}"), want: []string{"manager.runtime.address", `did you mean "unix:///run/x.sock"?`}},
		"remote pipe":            {doc: v3("manager: {runtime: {name: containerd, address: 'npipe://server/pipe/x'}}"), want: []string{"manager.runtime.address", "local pipes"}},
		"unix windows address":   {doc: v3("manager: {runtime: {name: containerd, windowsAddress: 'unix:///x.sock'}}"), want: []string{"manager.runtime.windowsAddress", "must be a named pipe"}},
		"empty windows repo":     {doc: v3("components: {remover: {windows: {image: {tag: x}}}}"), want: []string{"components.remover.windows.image.repo: Required value"}},
		"empty windows command":  {doc: v3("components: {remover: {windows: {command: ['']}}}"), want: []string{"components.remover.windows.command[0]"}},
		"address without name":   {doc: v3("manager: {runtime: {address: 'unix:///x.sock'}}"), want: []string{"manager.runtime.name: Required value"}},
		"unknown runtime v3":     {doc: v3("manager: {runtime: {name: docker}}"), want: []string{`manager.runtime.name: Unsupported value: "docker"`, "containerd"}},
		"unknown runtime v1a2":   {doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {runtime: podman}", want: []string{`manager.runtime: Unsupported value: "podman"`}},
		"string runtime in v3":   {doc: v3("manager: {runtime: containerd}"), want: []string{"manager.runtime", "must be a mapping", "{name, address}"}},
		"object runtime in v2":   {doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {runtime: {name: containerd}}", want: []string{"manager.runtime", "must be a string"}},
		"filter type":            {doc: v3("manager: {nodeFilter: {type: only}}"), want: []string{`manager.nodeFilter.type: Unsupported value: "only"`, "exclude", "include"}},
		"filter selector":        {doc: v3("manager: {nodeFilter: {selectors: [ok, 'a=b=c']}}"), want: []string{"manager.nodeFilter.selectors[1]"}},
		"empty selector":         {doc: v3("manager: {nodeFilter: {selectors: ['']}}"), want: []string{"manager.nodeFilter.selectors[0]"}},
		"ratio above one":        {doc: v3("manager: {imageJob: {successRatio: 1.5}}"), want: []string{"manager.imageJob.successRatio", "1.5", "between 0 and 1"}},
		"ratio below zero":       {doc: v3("manager: {imageJob: {successRatio: -0.1}}"), want: []string{"manager.imageJob.successRatio", "between 0 and 1"}},
		"ratio not a number":     {doc: v3("manager: {imageJob: {successRatio: high}}"), want: []string{"manager.imageJob.successRatio", "must be a number"}},
		"bad cron":               {doc: v3("manager: {scheduling: {cron: 'every day'}}"), want: []string{"manager.scheduling.cron", "cron expression"}},
		"bad waves":              {doc: v3("manager: {imageJob: {maxConcurrentNodes: lots}}"), want: []string{"manager.imageJob.maxConcurrentNodes", "percentage"}},
		"bad percent":            {doc: v3("manager: {imageJob: {maxConcurrentNodes: 150%}}"), want: []string{"manager.imageJob.maxConcurrentNodes", "between 1% and 100%"}},
		"zero start timeout":     {doc: v3("manager: {imageJob: {podStartTimeout: 0s}}"), want: []string{"manager.imageJob.podStartTimeout", "greater than zero"}},
		"selector key":           {doc: v3("manager: {imageJob: {nodeSelector: {'bad key': x}}}"), want: []string{"manager.imageJob.nodeSelector[bad key]", "label key"}},
		"selector value":         {doc: v3("manager: {imageJob: {nodeSelector: {pool: 'a b'}}}"), want: []string{"manager.imageJob.nodeSelector[pool]", `"a b"`, "label value"}},
		"selector not a map":     {doc: v3("manager: {imageJob: {nodeSelector: [pool=gpu]}}"), want: []string{"manager.imageJob.nodeSelector", "must be a mapping"}},
		"toleration operator":    {doc: v3("manager: {imageJob: {tolerations: [{key: a, operator: Gt, value: '1'}]}}"), want: []string{`manager.imageJob.tolerations[0].operator: Unsupported value: "Gt"`, "Equal", "Exists"}},
		"exists with a value":    {doc: v3("manager: {imageJob: {tolerations: [{key: a, operator: Exists, value: b}]}}"), want: []string{"manager.imageJob.tolerations[0].value", "must be empty when operator is Exists"}},
		"equal without key":      {doc: v3("manager: {imageJob: {tolerations: [{operator: Exists}, {value: b}]}}"), want: []string{"manager.imageJob.tolerations[1].operator", "must be Exists when key is empty"}},
		"toleration key":         {doc: v3("manager: {imageJob: {tolerations: [{key: 'a b', operator: Exists}]}}"), want: []string{"manager.imageJob.tolerations[0].key", `"a b"`}},
		"toleration value":       {doc: v3("manager: {imageJob: {tolerations: [{key: a, value: 'x y'}]}}"), want: []string{"manager.imageJob.tolerations[0].value", `"x y"`}},
		"toleration effect":      {doc: v3("manager: {imageJob: {tolerations: [{key: a, operator: Exists, effect: NoExecution}]}}"), want: []string{`manager.imageJob.tolerations[0].effect: Unsupported value: "NoExecution"`, "NoSchedule", "PreferNoSchedule", "NoExecute"}},
		"seconds not NoExecute":  {doc: v3("manager: {imageJob: {tolerations: [{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 60}]}}"), want: []string{"manager.imageJob.tolerations[0].tolerationSeconds", "NoExecute"}},
		"tolerations not a list": {doc: v3("manager: {imageJob: {tolerations: {key: a}}}"), want: []string{"manager.imageJob.tolerations", "must be a list"}},
		"log level":              {doc: v3("manager: {logLevel: verbose}"), want: []string{`manager.logLevel: Unsupported value: "verbose"`}},
		"otlp with scheme":       {doc: v3("manager: {otlpEndpoint: 'http://collector:4318'}"), want: []string{"manager.otlpEndpoint", "host:port"}},
		"otlp without port":      {doc: v3("manager: {otlpEndpoint: collector}"), want: []string{"manager.otlpEndpoint"}},
		"profile port":           {doc: v3("manager: {profile: {enabled: true, port: 70000}}"), want: []string{"manager.profile.port", "1-65535"}},
		"profile port zero":      {doc: v3("manager: {profile: {enabled: true, port: 0}}"), want: []string{"manager.profile.port"}},
		"pull secret name":       {doc: v3("manager: {pullSecrets: [Bad_Name]}"), want: []string{"manager.pullSecrets[0]"}},
		"priority class":         {doc: v3("manager: {priorityClassName: 'not valid'}"), want: []string{"manager.priorityClassName"}},
		"pod label key":          {doc: v3("manager: {additionalPodLabels: {'bad key': x}}"), want: []string{"manager.additionalPodLabels", "bad key"}},
		"pod label value":        {doc: v3("manager: {additionalPodLabels: {team: 'a b'}}"), want: []string{"manager.additionalPodLabels", "a b"}},
		"empty image repo":       {doc: v3("components: {remover: {image: {repo: ''}}}"), want: []string{"components.remover.image.repo: Required value"}},
		"volume without name":    {doc: v3("components: {scanner: {volumes: [{hostPath: {path: /x}}]}}"), want: []string{"components.scanner.volumes[0].name: Required value"}},
		"duplicate volume":       {doc: v3("components: {scanner: {volumes: [{name: a, hostPath: {path: /x}}, {name: a, hostPath: {path: /y}}]}}"), want: []string{"components.scanner.volumes[1].name: Duplicate value"}},
		"enabled not bool":       {doc: v3("components: {collector: {enabled: maybe}}"), want: []string{"components.collector.enabled", "true or false"}},
		"every error at once": {
			doc:  v3("manager: {logLevel: loud, imageJob: {successRatio: 2}, nodeFilter: {type: maybe}}"),
			want: []string{"manager.logLevel", "manager.imageJob.successRatio", "manager.nodeFilter.type"},
		},
		"too large": {doc: "apiVersion: eraser.sh/v1alpha3\n#" + strings.Repeat("x", MaxDocumentSize), want: []string{"more than"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("a config came with the error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not mention %q", err, w)
				}
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want []string
	}{
		"none": {doc: "apiVersion: eraser.sh/v1alpha3"},
		"cpu limit": {
			doc:  "apiVersion: eraser.sh/v1alpha3\ncomponents: {remover: {limit: {cpu: 1000m}}}",
			want: []string{"components.remover.limit.cpu: ignored: worker containers get no CPU limit"},
		},
		"scanner without collector": {
			doc:  "apiVersion: eraser.sh/v1alpha3\ncomponents: {scanner: {enabled: true}}",
			want: []string{"components.scanner.enabled: the scanner runs only in scheduled runs, which need components.collector.enabled: true"},
		},
		"non-hostPath volume": {
			doc:  "apiVersion: eraser.sh/v1alpha3\ncomponents: {scanner: {volumes: [{name: a, emptyDir: {}}]}}",
			want: []string{"components.scanner.volumes[0]: only hostPath volumes are mounted into the scanner; this one is ignored"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, got, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHelmRuntimeConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "helm-runtimeconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, warnings, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(warnings) != 4 {
		t.Errorf("want the four ignored-key warnings, got %q", warnings)
	}
	want := defaults(VersionV1alpha3)
	want.Manager.NodeFilter.Selectors = []string{CleanupFilterLabel, "kubernetes.io/os=windows"}
	want.Components.Collector.Enabled, want.Components.Scanner.Enabled = true, true
	for _, c := range []*Component{&want.Components.Collector, &want.Components.Scanner, &want.Components.Remover} {
		c.Image.Tag = "v1.5.0"
	}
	want.Manager.PullSecrets = []string{}
	want.Manager.AdditionalPodLabels = map[string]string{}
	if diff := cmp.Diff(want, got, cmpQuantity); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestParseImage(t *testing.T) {
	cases := map[string]struct {
		ref     string
		want    Image
		wantErr bool
	}{
		"repo and tag":      {ref: "ghcr.io/x/remover:v1", want: Image{Repo: "ghcr.io/x/remover", Tag: "v1"}},
		"no tag":            {ref: "remover", want: Image{Repo: "remover"}},
		"registry port":     {ref: "localhost:5000/remover", want: Image{Repo: "localhost:5000/remover"}},
		"registry port tag": {ref: "localhost:5000/remover:v2", want: Image{Repo: "localhost:5000/remover", Tag: "v2"}},
		"digest":            {ref: "r/remover@sha256:abcd", want: Image{Repo: "r/remover@sha256:abcd"}},
		"empty":             {ref: "", wantErr: true},
		"space":             {ref: "a b", wantErr: true},
		"no repo, tag":      {ref: ":v1", wantErr: true},
		"empty tag":         {ref: "remover:", wantErr: true},
		"no repo, digest":   {ref: "@sha256:abcd", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseImage(tc.ref)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err == nil && got.Ref() != tc.ref {
				t.Errorf("Ref() = %q, want %q", got.Ref(), tc.ref)
			}
		})
	}
}
