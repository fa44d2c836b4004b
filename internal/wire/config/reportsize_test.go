package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMaxReportSize: manager.imageJob.cleanup.maxReportSize is a quantity
// of bytes, 128Mi unless set; 0 is no bound; a negative one is refused.
func TestMaxReportSize(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want int64
		err  string
	}{
		"default":   {doc: "{}", want: 128 << 20},
		"set":       {doc: "{imageJob: {cleanup: {maxReportSize: 1Gi}}}", want: 1 << 30},
		"in bytes":  {doc: "{imageJob: {cleanup: {maxReportSize: 5000000}}}", want: 5000000},
		"no bound":  {doc: "{imageJob: {cleanup: {maxReportSize: 0}}}", want: 0},
		"negative":  {doc: "{imageJob: {cleanup: {maxReportSize: -1Mi}}}", err: "manager.imageJob.cleanup.maxReportSize"},
		"not bytes": {doc: "{imageJob: {cleanup: {maxReportSize: lots}}}", err: "manager.imageJob.cleanup.maxReportSize"},
	}
	got, want := map[string]int64{}, map[string]int64{}
	for name, tc := range cases {
		cfg, _, err := Parse([]byte("apiVersion: eraser.sh/v1alpha3\nmanager: " + tc.doc))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one naming %s", name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got[name], want[name] = cfg.Manager.ImageJob.Cleanup.MaxReportSize, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("maxReportSize (-want +got):\n%s", diff)
	}
}
