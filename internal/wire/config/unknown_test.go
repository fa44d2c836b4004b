package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// errorPaths are the field paths of the errors Parse reported, in order.
func errorPaths(t *testing.T, err error) []string {
	t.Helper()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("error %v is not a list of field errors", err)
	}
	var out []string
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) {
			t.Fatalf("error %v has no field path", e)
		}
		out = append(out, fe.Field)
	}
	return out
}

// TestUnknownKeysRefused: a key the document's version does not have is an
// error naming its path, never a default quietly kept. A typo in the node
// filter or the tolerations would otherwise run the job on more nodes than
// the user meant.
func TestUnknownKeysRefused(t *testing.T) {
	v3 := func(body string) string { return "apiVersion: eraser.sh/v1alpha3\n" + body }
	cases := map[string]struct {
		doc   string
		paths []string
		// hints are substrings the error must carry besides the path.
		hints []string
	}{
		"node filter selector": {
			doc:   v3("manager: {nodeFilter: {type: include, selector: ['pool=gpu']}}"),
			paths: []string{"manager.nodeFilter.selector"},
			hints: []string{"unknown key", `did you mean "selectors"`},
		},
		"tolerations misspelt": {
			doc:   v3("manager: {imageJob: {tolerattions: [{key: dedicated, operator: Exists}]}}"),
			paths: []string{"manager.imageJob.tolerattions"},
			hints: []string{`did you mean "tolerations"`},
		},
		"toleration field misspelt": {
			doc:   v3("manager: {imageJob: {tolerations: [{key: a, operator: Exists, efect: NoSchedule}]}}"),
			paths: []string{"manager.imageJob.tolerations[0].efect"},
			hints: []string{`did you mean "effect"`},
		},
		"node selector misspelt": {
			doc:   v3("manager: {imageJob: {nodeSelectors: {pool: general}}}"),
			paths: []string{"manager.imageJob.nodeSelectors"},
			hints: []string{`did you mean "nodeSelector"`},
		},
		"case differs": {
			doc:   v3("manager: {NodeFilter: {type: include, selectors: ['pool=gpu']}}"),
			paths: []string{"manager.NodeFilter"},
			hints: []string{`did you mean "nodeFilter"`},
		},
		"several, in order": {
			doc:   v3("manager: {nodeFiltr: {}, imageJob: {successRation: 0.5}}\ncomponents: {remover: {limits: {mem: 1Gi}}}"),
			paths: []string{"components.remover.limits", "manager.imageJob.successRation", "manager.nodeFiltr"},
		},
		"top level": {
			doc:   v3("spec: {}"),
			paths: []string{"spec"},
			hints: []string{"apiVersion", "components", "manager"},
		},
		"volume field": {
			doc:   v3("components: {scanner: {volumes: [{name: a, hostPath: {path: /x, mode: ro}}]}}"),
			paths: []string{"components.scanner.volumes[0].hostPath.mode"},
		},
		"windows section": {
			doc:   v3("components: {remover: {windows: {commands: [remover.exe]}}}"),
			paths: []string{"components.remover.windows.commands"},
			hints: []string{`did you mean "command"`},
		},
		"v1alpha1 has no remover": {
			doc:   "apiVersion: eraser.sh/v1alpha1\ncomponents: {remover: {image: {repo: r}}}",
			paths: []string{"components.remover"},
			hints: []string{"components.eraser"},
		},
		"v1alpha2 has no eraser": {
			doc:   "apiVersion: eraser.sh/v1alpha2\ncomponents: {eraser: {image: {repo: r}}}",
			paths: []string{"components.eraser"},
			hints: []string{"components.remover"},
		},
		"v1alpha2 has no additionalPodLabels": {
			doc:   "apiVersion: eraser.sh/v1alpha2\nmanager: {additionalPodLabels: {a: b}}",
			paths: []string{"manager.additionalPodLabels"},
			hints: []string{"eraser.sh/v1alpha3"},
		},
		"with an invalid value": {
			doc:   v3("manager: {logLevel: loud, nodeFilter: {selector: [a]}}"),
			paths: []string{"manager.nodeFilter.selector", "manager.logLevel"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			t.Log(err)
			if cfg != nil {
				t.Error("a config came with the error")
			}
			if diff := cmp.Diff(tc.paths, errorPaths(t, err)); diff != "" {
				t.Errorf("error paths (-want +got):\n%s\nerror: %v", diff, err)
			}
			for _, h := range tc.hints {
				if !strings.Contains(err.Error(), h) {
					t.Errorf("error %q\ndoes not mention %q", err, h)
				}
			}
		})
	}
}

// TestIgnoredUpstreamKeys: the keys upstream accepted without effect are
// still accepted, each with a warning, wherever they appear.
func TestIgnoredUpstreamKeys(t *testing.T) {
	helm := "ignored, as by upstream Eraser; the manager's flags configure it"
	docs := "ignored, as by upstream Eraser, whose docs listed it but never read it; components.scanner.volumes mounts host paths into the scanner"
	cases := map[string]struct {
		doc  string
		want []string
	}{
		"helm's sections": {
			doc:  "apiVersion: eraser.sh/v1alpha3\nhealth: {healthProbeBindAddress: ':8081'}\nmetrics: {}\nwebhook: {port: 9443}\nleaderElection: {leaderElect: true}",
			want: []string{"health: " + helm, "metrics: " + helm, "webhook: " + helm, "leaderElection: " + helm},
		},
		"helm's sections, null": {
			doc:  "apiVersion: eraser.sh/v1alpha1\nhealth:\nmetrics:",
			want: []string{"health: " + helm, "metrics: " + helm},
		},
		"scanner volumes from upstream's docs": {
			doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {extraScannerVolumes: [{name: a, hostPath: {path: /a}}], extraScannerVolumeMounts: [{name: a, mountPath: /a}]}",
			want: []string{
				"manager.extraScannerVolumes: " + docs,
				"manager.extraScannerVolumeMounts: " + docs,
			},
		},
		"remover on": {doc: "apiVersion: eraser.sh/v1alpha3\ncomponents: {remover: {enabled: true}}"},
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
