package config

// Documents refused or warned about, repeated keys among them, and Helm's
// runtimeConfig.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
		"negative catchUpBatch":  {doc: v3("manager: {scheduling: {catchUpBatch: -1m}}"), want: []string{"manager.scheduling.catchUpBatch", "negative"}},
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
		"zero node wait timeout": {doc: v3("manager: {imageJob: {nodeWaitTimeout: 0s}}"), want: []string{"manager.imageJob.nodeWaitTimeout", "greater than zero"}},
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

// A repeated key, or one re-cased, in the EraserConfig or in the scanner's
// configuration is refused: sigs.k8s.io/yaml keeps the last without a word
// (a second nodeFilter would drop the first one's selectors).
func TestRepeatedKeysRefused(t *testing.T) {
	cases := map[string]struct {
		doc, want string
	}{
		"repeated nodeFilter": {doc: "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager:\n  nodeFilter:\n    type: exclude\n    selectors: [pool=gpu]\n  nodeFilter:\n    type: exclude\n",
			want: `EraserConfig: line 7: key "nodeFilter" appears again (first on line 4)`},
		"re-cased manager": {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {}\nManager: {}\n",
			want: `EraserConfig: line 3: key "Manager" differs only in case from "manager" on line 2`},
		"scanner config": {doc: "apiVersion: eraser.sh/v1alpha3\ncomponents:\n  collector:\n    enabled: true\n  scanner:\n    enabled: true\n    config: |\n      deleteFailedImages: false\n      deleteFailedImages: true\n",
			want: `key "deleteFailedImages" appears again`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
