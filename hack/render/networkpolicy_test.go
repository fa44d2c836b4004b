package render

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// scanServicePolicy is the ingress the NetworkPolicy admits to the
// manager's pods: the port only the worker pods may reach, and those open
// to all.
type scanServicePolicy struct {
	WorkersOnly []int32
	OpenToAll   []int32
}

// checkScanServicePolicy asserts that the policy selects the manager's
// pods (and no other), admits the worker pods of the release's namespace
// (and no other pod) to the scan service, and leaves the other ports open;
// it returns the ports, or nil when there is no policy.
func checkScanServicePolicy(t *testing.T, objs objects, ns string) *scanServicePolicy {
	t.Helper()
	if find(objs, "NetworkPolicy", "eraser-scan-service") == nil {
		return nil
	}
	np := get[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "eraser-scan-service")
	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) || np.Namespace != ns {
		t.Errorf("the policy in %q selects %v, not the manager's pods %v in %q (%v)", np.Namespace, np.Spec.PodSelector, dep.Spec.Template.Labels, ns, err)
	}
	if !cmp.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policy types %v, want Ingress alone (the manager's own calls stay open)", np.Spec.PolicyTypes)
	}
	got := &scanServicePolicy{}
	for i, rule := range np.Spec.Ingress {
		var ports []int32
		for _, p := range rule.Ports {
			if p.Port == nil || p.EndPort != nil {
				t.Errorf("rule %d admits a range or every port: %+v", i, p)
				continue
			}
			ports = append(ports, p.Port.IntVal)
		}
		if len(ports) == 0 {
			t.Errorf("rule %d admits every port", i)
		}
		if len(rule.From) == 0 {
			got.OpenToAll = append(got.OpenToAll, ports...)
			continue
		}
		for _, peer := range rule.From {
			if peer.NamespaceSelector != nil || peer.IPBlock != nil || peer.PodSelector == nil {
				t.Errorf("rule %d admits pods of other namespaces or addresses: %+v", i, peer)
				continue
			}
			from, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err != nil || !from.Matches(labels.Set{podspec.LabelJob: "imagejob-x", podspec.LabelType: "collector"}) ||
				from.Matches(labels.Set{"app": "tenant"}) || from.Matches(labels.Set(dep.Spec.Template.Labels)) {
				t.Errorf("rule %d admits %v, want the worker pods (label %s) alone (%v)", i, peer.PodSelector, podspec.LabelJob, err)
			}
		}
		got.WorkersOnly = append(got.WorkersOnly, ports...)
	}
	return got
}

// TestChartScanServicePolicy: the chart's NetworkPolicy follows the
// manager's ports as deploy.additionalArgs sets them, and is left out when
// the scan service is off or the value says so.
func TestChartScanServicePolicy(t *testing.T) {
	for name, tc := range map[string]struct {
		set  []string
		want *scanServicePolicy
	}{
		"the defaults": {want: &scanServicePolicy{WorkersOnly: []int32{8890}, OpenToAll: []int32{8889, 8081}}},
		"ports moved, pprof on, metrics off": {
			set:  []string{"deploy.additionalArgs={--scan-service-bind-address=:9990,--pprof-bind-address=127.0.0.1:6060,--metrics-bind-address=0}"},
			want: &scanServicePolicy{WorkersOnly: []int32{9990}, OpenToAll: []int32{8081, 6060}},
		},
		"the scan service off": {set: []string{"deploy.additionalArgs={--scan-service-bind-address=0}"}},
		"the policy off":       {set: []string{"deploy.scanService.networkPolicy=false"}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, Options{Namespace: "ops", Set: tc.set})
			if diff := cmp.Diff(tc.want, checkScanServicePolicy(t, objs, "ops")); diff != "" {
				t.Errorf("the policy's ports (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStaticManifestScanServicePolicy: deploy/eraser.yaml ships the same
// policy as the chart's defaults.
func TestStaticManifestScanServicePolicy(t *testing.T) {
	want := &scanServicePolicy{WorkersOnly: []int32{8890}, OpenToAll: []int32{8889, 8081}}
	if diff := cmp.Diff(want, checkScanServicePolicy(t, staticManifest(t), DefaultNamespace)); diff != "" {
		t.Errorf("the policy's ports (-want +got):\n%s", diff)
	}
}

// egressOpen says whether a NetworkPolicy of objs lets a pod labelled
// podLabels connect anywhere, as a namespace whose policies deny egress by
// default needs for the manager (API server, DB repository) and the
// workers (the leader's scan service).
func egressOpen(t *testing.T, objs objects, podLabels map[string]string) bool {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() != "NetworkPolicy" {
			continue
		}
		np := get[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", u.GetName())
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		for _, rule := range np.Spec.Egress {
			if len(rule.To) == 0 && len(rule.Ports) == 0 && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				return true
			}
		}
	}
	return false
}

// TestEgressPolicies: the chart and the static manifest let the manager,
// the worker pods and the chart's helm test pod connect out in a
// namespace that denies egress by default; the chart's value turns the
// policies off.
func TestEgressPolicies(t *testing.T) {
	worker := map[string]string{podspec.LabelJob: "imagejob-x", podspec.LabelType: "collector"}
	for name, tc := range map[string]struct {
		objs func(t *testing.T) objects
		want bool
	}{
		"chart defaults":  {objs: func(t *testing.T) objects { return render(t, Options{Namespace: "ops"}) }, want: true},
		"static manifest": {objs: staticManifest, want: true},
		"chart, policies off": {objs: func(t *testing.T) objects {
			return render(t, Options{Namespace: "ops", Set: []string{"deploy.scanService.networkPolicy=false"}})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := tc.objs(t)
			dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
			pods := map[string]map[string]string{"manager": dep.Spec.Template.Labels, "worker": worker}
			if name != "static manifest" {
				// The helm test pod carries the chart's labels, the
				// Deployment's but control-plane.
				check := maps.Clone(dep.Labels)
				delete(check, "control-plane")
				pods["helm test"] = check
			}
			for pod, l := range pods {
				if got := egressOpen(t, objs, l); got != tc.want {
					t.Errorf("%s pod (labels %v) may connect out: %v, want %v", pod, l, got, tc.want)
				}
			}
		})
	}
}
