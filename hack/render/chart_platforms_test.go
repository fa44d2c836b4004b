package render

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// The values file of each platform in examples/values renders an install
// whose configuration the manager accepts without a warning, and which a
// real API server takes (server-side apply, dry run).
func TestPlatformValues(t *testing.T) {
	testenv.Require(t)
	type want struct {
		runtime   config.RuntimeName
		windows   bool // Windows nodes get workers
		openshift bool
	}
	cases := map[string]want{
		"eks.yaml":         {runtime: config.RuntimeContainerd},
		"aks-windows.yaml": {runtime: config.RuntimeContainerd, windows: true},
		"openshift.yaml":   {runtime: config.RuntimeCrio, openshift: true},
		"k3s.yaml":         {runtime: config.RuntimeContainerd},
		"rke2.yaml":        {runtime: config.RuntimeContainerd},
	}
	files, err := filepath.Glob(repoPath("examples", "values", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	var expected []string
	for n := range cases {
		expected = append(expected, n)
	}
	slices.Sort(expected)
	if diff := cmp.Diff(expected, names); diff != "" {
		t.Errorf("examples/values and this test's cases differ (-cases +files):\n%s", diff)
	}
	for i, f := range files {
		w, ok := cases[filepath.Base(f)]
		if !ok {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			ns := fmt.Sprintf("platform-%d", i)
			objs := render(t, Options{Namespace: ns, ValuesFiles: []string{f}, Set: []string{"imageRegistry=registry.example/eraser"}})
			checkInstall(t, objs, ns)
			cfg, warnings := managerConfig(t, objs)
			if len(warnings) > 0 {
				t.Errorf("the configuration draws warnings: %q", warnings)
			}
			if cfg.Manager.Runtime.Name != w.runtime {
				t.Errorf("runtime %s, want %s", cfg.Manager.Runtime.Name, w.runtime)
			}
			if got := !slices.Contains(cfg.Manager.NodeFilter.Selectors, "kubernetes.io/os=windows"); got != w.windows {
				t.Errorf("Windows nodes get workers: %v, want %v", got, w.windows)
			}
			dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
			psc := dep.Spec.Template.Spec.SecurityContext
			if w.openshift {
				if psc.RunAsUser != nil || psc.RunAsGroup != nil {
					t.Errorf("the manager pins user %v group %v: restricted-v2 assigns them", psc.RunAsUser, psc.RunAsGroup)
				}
				scc := find(objs, "SecurityContextConstraints", "eraser-workers")
				if scc == nil {
					t.Fatal("no SecurityContextConstraints eraser-workers")
				}
				if v := scc.Object["allowHostDirVolumePlugin"]; v != true {
					t.Errorf("the SCC allows no hostPath volume: %v", v)
				}
				if v := scc.Object["allowPrivilegedContainer"]; v != false {
					t.Errorf("the SCC allows privileged containers: %v", v)
				}
				rb := get[rbacv1.RoleBinding](t, objs, "RoleBinding", "eraser-workers-scc")
				if len(rb.Subjects) != 1 || rb.Subjects[0].Name != "eraser-imagejob-pods" || rb.Subjects[0].Namespace != ns {
					t.Errorf("the SCC's binding: %+v", rb.Subjects)
				}
				stub, err := os.ReadFile(filepath.Join("testdata", "openshift-scc-crd.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				objs = append(decode(t, string(stub)), objs...)
			} else if find(objs, "SecurityContextConstraints", "eraser-workers") != nil {
				t.Error("an SCC outside OpenShift")
			}
			namespace(t, ns, nil)
			apply(t, objs, true)
		})
	}
}
