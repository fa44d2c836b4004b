package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// rbac.workloadProtection: false leaves the cluster-wide read of pods and
// workloads out of the ClusterRole, and no other rule, and runs the manager
// without the reference index; it needs protectReferenced off, or the
// chart refuses with the fix.
func TestChartWorkloadProtectionSwitch(t *testing.T) {
	type got struct {
		// Reads are the ClusterRole's pods, apps and batch resources.
		Reads []string
		// Others are its other resources.
		Others    []string
		IndexFlag bool
	}
	look := func(objs objects) got {
		var g got
		role := get[rbacv1.ClusterRole](t, objs, "ClusterRole", "eraser-manager-role")
		for _, r := range role.Rules {
			for _, res := range r.Resources {
				if slices.Contains(r.APIGroups, "apps") || slices.Contains(r.APIGroups, "batch") || slices.Contains(r.APIGroups, "") && res == "pods" {
					g.Reads = append(g.Reads, res)
				} else {
					g.Others = append(g.Others, res)
				}
			}
		}
		slices.Sort(g.Reads)
		slices.Sort(g.Others)
		dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
		g.IndexFlag = slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--reference-index=false")
		return g
	}
	on := look(render(t, Options{Release: "eraser", Namespace: "eraser-system"}))
	if diff := cmp.Diff([]string{"cronjobs", "daemonsets", "deployments", "jobs", "pods", "replicasets", "statefulsets"}, on.Reads); diff != "" {
		t.Errorf("default ClusterRole's workload reads (-want +got):\n%s", diff)
	}
	if on.IndexFlag {
		t.Error("the default install runs the manager without the reference index")
	}
	off := look(render(t, Options{Release: "eraser", Namespace: "eraser-system",
		Set: []string{"rbac.workloadProtection=false", "runtimeConfig.manager.retention.protectReferenced=false"}}))
	want := got{Others: on.Others, IndexFlag: true}
	if diff := cmp.Diff(want, off); diff != "" {
		t.Errorf("rbac.workloadProtection=false (-want +got):\n%s", diff)
	}

	for name, set := range map[string][]string{
		"protectReferenced left on": {"rbac.workloadProtection=false"},
		"protectReferenced true":    {"rbac.workloadProtection=false", "runtimeConfig.manager.retention.protectReferenced=true"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Chart(chartDir(), Options{Release: "eraser", Namespace: "eraser-system", KubeVersion: kubeVersion, Set: set})
			if err == nil || !strings.Contains(err.Error(), "runtimeConfig.manager.retention.protectReferenced: false") {
				t.Errorf("render: %v; want a refusal naming protectReferenced", err)
			}
		})
	}
}
