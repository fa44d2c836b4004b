package helmtier

import (
	"fmt"
	"os/exec"
	"testing"
)

// Each Helm CLI the tier builds renders the chart as a released Helm does,
// with no cluster and no --kube-version: its default capabilities are the
// Kubernetes version it was built against, which the chart's kubeVersion
// admits. An unstamped Helm 3 says v1.20.0 and refuses the chart.
func TestTemplateWithDefaultCapabilities(t *testing.T) {
	if testing.Short() {
		t.Skip("install tier: run make test-install")
	}
	for _, major := range []int{3, 4} {
		t.Run(fmt.Sprintf("helm%d", major), func(t *testing.T) {
			out, err := exec.Command(helmBinary(t, major), "template", "eraser", ourChart()).CombinedOutput()
			if err != nil {
				t.Fatalf("helm template %s: %v\n%s", ourChart(), err, out)
			}
		})
	}
}
