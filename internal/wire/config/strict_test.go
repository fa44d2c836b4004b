package config

import (
	"strings"
	"testing"
)

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
