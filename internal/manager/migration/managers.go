package migration

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Flavour is which Eraser a manager Deployment runs.
type Flavour string

const (
	Upstream Flavour = "upstream Eraser"
	// AKSAddon is AKS's Image Cleaner, upstream Eraser that AKS runs and
	// reconciles in kube-system.
	AKSAddon Flavour = "the AKS Image Cleaner add-on"
	This     Flavour = "this Eraser"
)

// Manager is a Deployment found running an Eraser manager.
type Manager struct {
	Namespace, Name string
	Flavour         Flavour
	// Version is the image's tag, "" when it has none.
	Version string
	// HelmRelease names the Helm release that owns it, "" for none.
	HelmRelease string
	// Replicas is the number the Deployment asks for.
	Replicas int32
}

func (m Manager) String() string {
	s := fmt.Sprintf("%s %s", m.Flavour, m.Version)
	if m.HelmRelease != "" {
		s += fmt.Sprintf(" (Helm release %s)", m.HelmRelease)
	}
	return strings.TrimSpace(strings.ReplaceAll(s, "  ", " "))
}

// The names and labels an Eraser manager's Deployment carries, upstream's
// and this chart's alike (this chart keeps upstream's, so that an upgrade
// from upstream's release replaces the Deployment in place).
const (
	managerDeployment = "eraser-controller-manager"
	managerImage      = "eraser-manager"
	labelControlPlane = "control-plane"
)

// The repositories upstream published its manager under, and the path AKS
// pulls the add-on's from.
var upstreamRepositories = []string{"eraser-dev/", "azure/eraser", "oss/eraser/"}

// The labels AKS puts on what its add-on manager reconciles.
var aksLabels = []string{"addonmanager.kubernetes.io/mode", "kubernetes.azure.com/managedby"}

// IsManager reports whether the Deployment runs an Eraser manager: a
// container of the image eraser-manager, or upstream's Deployment name
// and label (a mirror may rename the image).
func IsManager(d *appsv1.Deployment) bool {
	if d.Name == managerDeployment && d.Labels[labelControlPlane] == "controller-manager" {
		return true
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if repo, _ := splitImage(c.Image); repo == managerImage || strings.HasSuffix(repo, "/"+managerImage) {
			return true
		}
	}
	return false
}

// Classify says which Eraser a manager Deployment runs.
func Classify(d *appsv1.Deployment) Manager {
	m := Manager{Namespace: d.Namespace, Name: d.Name, Flavour: This, Replicas: 1,
		HelmRelease: d.Annotations["meta.helm.sh/release-name"]}
	if d.Spec.Replicas != nil {
		m.Replicas = *d.Spec.Replicas
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		repo, tag := splitImage(c.Image)
		if repo != managerImage && !strings.HasSuffix(repo, "/"+managerImage) && c.Name != "manager" {
			continue
		}
		m.Version = tag
		for _, u := range upstreamRepositories {
			if strings.Contains(repo, u) {
				m.Flavour = Upstream
			}
		}
		// Upstream's Deployments start /manager explicitly; this one's
		// image has it as its entrypoint.
		if len(c.Command) == 1 && c.Command[0] == "/manager" {
			m.Flavour = Upstream
		}
	}
	if d.Namespace == "kube-system" || hasAny(d.Labels, aksLabels) {
		m.Flavour = AKSAddon
	}
	return m
}

// AKSOwned reports whether AKS's add-on manager reconciles the CRD.
func AKSOwned(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return hasAny(crd.Labels, aksLabels)
}

func hasAny(labels map[string]string, keys []string) bool {
	for _, k := range keys {
		if _, ok := labels[k]; ok {
			return true
		}
	}
	return false
}

// splitImage splits an image reference into its repository and tag,
// without parsing it: a mirror's name need not be canonical.
func splitImage(image string) (repo, tag string) {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:]
	}
	return image, ""
}

// Others are the Eraser managers, other than the one in namespace, that
// act on the cluster's eraser.sh objects: those asking for at least one
// replica. A Deployment scaled to zero acts on nothing.
func Others(namespace string, deployments []appsv1.Deployment) []Manager {
	var out []Manager
	for i := range deployments {
		d := &deployments[i]
		if d.Namespace == namespace || !IsManager(d) {
			continue
		}
		if m := Classify(d); m.Replicas > 0 {
			out = append(out, m)
		}
	}
	return out
}

// managerFindings: upstream's manager where this Eraser is to run, and any
// other manager acting on the same CRDs.
func managerFindings(c Cluster) []Finding {
	var out []Finding
	for i := range c.Deployments {
		d := &c.Deployments[i]
		if d.Namespace != c.Namespace || !IsManager(d) {
			continue
		}
		if m := Classify(d); m.Flavour == Upstream {
			out = append(out, Finding{Severity: Difference, Area: "manager", Object: "deployment/" + d.Namespace + "/" + d.Name,
				What: m.String() + " runs here: installing this chart in its place replaces it; the differences below are what changes"})
		}
	}
	for _, m := range Others(c.Namespace, c.Deployments) {
		out = append(out, Finding{Severity: Blocking, Area: "manager", Object: "deployment/" + m.Namespace + "/" + m.Name, What: OtherManagerAdvice(m)})
	}
	for i := range c.CRDs {
		if crd := &c.CRDs[i]; AKSOwned(crd) {
			out = append(out, Finding{Severity: Blocking, Area: "manager", Object: "customresourcedefinition/" + crd.Name,
				What: "reconciled by AKS's add-on manager (the Image Cleaner add-on): run `az aks update --disable-image-cleaner -g <resource-group> -n <cluster>` first"})
		}
	}
	return out
}

// OtherManagerAdvice says why another manager is a problem and what to do.
func OtherManagerAdvice(m Manager) string {
	const both = "two managers would act on the same ImageLists and ImageJobs (each runs the lists; upstream's deletes every ImageJob at its start)"
	switch m.Flavour {
	case AKSAddon:
		return m.String() + ": " + both + "; run `az aks update --disable-image-cleaner -g <resource-group> -n <cluster>` first"
	case Upstream:
		return m.String() + ": " + both + "; uninstall it (or scale it to 0) first, or install this chart in its namespace to replace it"
	}
	return m.String() + ": " + both + "; keep one install per cluster"
}
