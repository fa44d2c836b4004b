package eraserconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/testing/builder"
)

func TestDesiredRecord(t *testing.T) {
	const ns, key = "eraser-system", "controller_manager_config.yaml"
	live := builder.MakeConfigMap(ns, "eraser-manager-config").UID("new").Obj()
	deleted := builder.MakeConfigMap(ns, "eraser-manager-config").UID("old").Obj()
	record := func(owner *corev1.ConfigMap, doc string) *corev1.ConfigMap {
		return builder.MakeConfigMap(ns, "eraser-manager-config-last-good").ControlledBy(owner).Data(key, doc).Obj()
	}
	cases := map[string]struct {
		existing *corev1.ConfigMap
		raw      string
		setData  bool
		want     *corev1.ConfigMap
	}{
		"no record: created, owned by the live ConfigMap": {raw: "good", setData: true, want: record(live, "good")},
		"no record, adopting only: nothing to adopt":      {},
		"same document, same owner: no write":             {existing: record(live, "good"), raw: "good", setData: true},
		"new document":                                    {existing: record(live, "good"), raw: "better", setData: true, want: record(live, "better")},
		// The garbage collector would delete a record naming a ConfigMap
		// that is gone, however equal its document.
		"same document, owner deleted and re-created: re-owned":       {existing: record(deleted, "good"), raw: "good", setData: true, want: record(live, "good")},
		"document refused, owner re-created: re-owned, document kept": {existing: record(deleted, "good"), want: record(live, "good")},
		"adopting, already owned: no write":                           {existing: record(live, "good")},
		"two owners: only the live one is kept": {
			existing: builder.MakeConfigMap(ns, "eraser-manager-config-last-good").ControlledBy(deleted).ControlledBy(live).Data(key, "good").Obj(),
			raw:      "good", setData: true, want: record(live, "good"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := desiredRecord(tc.existing, live, key, []byte(tc.raw), tc.setData)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}
