package helmtier

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/repo"
)

const (
	imageListsCRD = "imagelists.eraser.sh"
	imageJobsCRD  = "imagejobs.eraser.sh"
)

// userObjects are what a user of upstream has in the cluster: an ImageList
// in each served version and a finished ImageJob.
const userObjects = `
apiVersion: eraser.sh/v1
kind: ImageList
metadata:
  name: migrate-v1
spec:
  images: [docker.io/library/alpine:3.7.3]
---
apiVersion: eraser.sh/v1alpha1
kind: ImageList
metadata:
  name: migrate-v1alpha1
spec:
  images: ["*"]
---
apiVersion: eraser.sh/v1
kind: ImageJob
metadata:
  name: migrate-job
`

var wantUserObjects = []string{
	"imagejob.eraser.sh/migrate-job",
	"imagelist.eraser.sh/migrate-v1",
	"imagelist.eraser.sh/migrate-v1alpha1",
}

// createUserObjects creates them with kubectl, the job finished as upstream's
// manager leaves one (its status written through the status subresource).
func (c *cluster) createUserObjects() {
	c.t.Helper()
	c.kubectlIn(userObjects, "apply", "-f", "-")
	c.kubectlDo("patch", "imagejob", "migrate-job", "--subresource=status", "--type=merge",
		"-p", `{"status":{"desired":1,"succeeded":1,"failed":0,"skipped":0,"phase":"Completed"}}`)
	c.userObjectsKept("before")
	// Creation times are whole seconds, and a list made in the install's
	// second counts as made after it: what follows is an install made
	// later, as after upstream it is.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
}

// userObjectsKept fails the test unless every user object is still served,
// the v1alpha1 list through v1alpha1 too, and logs kubectl get as a user
// would see it.
func (c *cluster) userObjectsKept(when string) {
	c.t.Helper()
	c.t.Logf("kubectl get imagelists,imagejobs %s:\n%s", when, c.kubectlDo("get", "imagelists,imagejobs"))
	out := c.kubectlDo("get", "imagelists,imagejobs", "-o", "name")
	// The manager's own jobs may be there too once it has run.
	var got []string
	for _, name := range strings.Fields(out) {
		if slices.Contains(wantUserObjects, name) {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(wantUserObjects, got); diff != "" {
		c.t.Fatalf("objects %s (-want +got):\n%s\nall: %s", when, diff, out)
	}
	c.kubectlDo("get", "imagelists.v1alpha1.eraser.sh", "migrate-v1alpha1")
	phase := c.kubectlDo("get", "imagejob", "migrate-job", "-o", "jsonpath={.status.phase}")
	if phase != "Completed" {
		c.t.Fatalf("job migrate-job %s: phase %q, want Completed", when, phase)
	}
}

// ourCRDSpec is the spec of the CRD our chart ships (controller-gen's
// output in charts/eraser/files/crds).
func ourCRDSpec(c *cluster, name string) apiextensionsv1.CustomResourceDefinitionSpec {
	c.t.Helper()
	files, err := filepath.Glob(filepath.Join(ourChart(), "files", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		c.t.Fatalf("no CRDs in the chart: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			c.t.Fatalf("%s: %v", f, err)
		}
		if crd.Name == name {
			return crd.Spec
		}
	}
	c.t.Fatalf("the chart has no CRD %s", name)
	return apiextensionsv1.CustomResourceDefinitionSpec{}
}

// servesOurCRDs fails the test unless both CRDs in the cluster have our
// chart's versions and schemas (an upgrade that left upstream's in place
// would leave the manager's status fields pruned).
func (c *cluster) servesOurCRDs() {
	c.t.Helper()
	for _, name := range []string{imageListsCRD, imageJobsCRD} {
		live := c.crd(name)
		if live == nil {
			c.t.Fatalf("CRD %s is gone", name)
		}
		want := ourCRDSpec(c, name)
		if diff := cmp.Diff(want.Versions, live.Spec.Versions); diff != "" {
			c.t.Errorf("CRD %s is not the chart's (-chart +cluster):\n%s", name, diff)
		}
	}
}

func ourChart() string { return filepath.Join(repo.Root(), "charts", "eraser") }

// upstreamShapedChart is the project's fixture of upstream's chart.
func upstreamShapedChart() string {
	return filepath.Join(repo.Root(), "hack", "render", "testdata", "upstream-chart")
}

// upstreamChartDir is upstream's released chart v1.4.1, read in place from
// the reference data beside the repository, where it exists.
func upstreamChartDir() string {
	return filepath.Join(repo.Root(), "..", "shared", "reference", "upstream-data", "helm", "chart-v1.4.1")
}

// scanServicePolicyInstalled checks, in the cluster, the NetworkPolicy
// that `helm install` created: it selects the manager's pods as the
// Deployment does, and admits to the scan service's port only the pods
// with the worker pods' job label in the release's namespace.
func (c *cluster) scanServicePolicyInstalled() {
	c.t.Helper()
	np := &networkingv1.NetworkPolicy{}
	if err := c.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "eraser-scan-service"}, np); err != nil {
		c.t.Fatalf("the scan service's NetworkPolicy: %v", err)
	}
	dep := &appsv1.Deployment{}
	if err := c.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "eraser-controller-manager"}, dep); err != nil {
		c.t.Fatal(err)
	}
	if diff := cmp.Diff(dep.Spec.Selector.MatchLabels, np.Spec.PodSelector.MatchLabels); diff != "" || len(np.Spec.PodSelector.MatchExpressions) > 0 {
		c.t.Errorf("the policy selects other pods than the manager's (-Deployment +policy):\n%s", diff)
	}
	workers := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: podspec.LabelJob, Operator: metav1.LabelSelectorOpExists}}}}}
	tcp := corev1.ProtocolTCP
	port := func(n int) networkingv1.NetworkPolicyPort {
		p := intstr.FromInt32(int32(n))
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p}
	}
	want := []networkingv1.NetworkPolicyIngressRule{
		{From: workers, Ports: []networkingv1.NetworkPolicyPort{port(8890)}},
		{Ports: []networkingv1.NetworkPolicyPort{port(8889), port(8081)}},
	}
	if diff := cmp.Diff(want, np.Spec.Ingress); diff != "" {
		c.t.Errorf("the policy's ingress (-want +got):\n%s", diff)
	}
}
