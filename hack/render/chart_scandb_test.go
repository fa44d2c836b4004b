package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// deploy.scanDB.caBundle mounts the ConfigMap's key into the manager as a
// file of the directory SSL_CERT_DIR names, which Go reads besides the
// image's CA bundle (internal/manager/scandb's TestPrivateCA downloads
// through it); unset, neither is there.
func TestScanDBCABundle(t *testing.T) {
	for name, tc := range map[string]struct {
		set  []string
		want map[string]string // SSL_CERT_DIR -> ConfigMap/key mounted there
	}{
		"unset": {},
		"a ConfigMap and key": {
			set:  []string{"deploy.scanDB.caBundle.configMap=corp-ca", "deploy.scanDB.caBundle.key=root.pem"},
			want: map[string]string{"/etc/eraser/scan-db-ca": "corp-ca/root.pem"},
		},
		"the default key": {
			set:  []string{"deploy.scanDB.caBundle.configMap=corp-ca"},
			want: map[string]string{"/etc/eraser/scan-db-ca": "corp-ca/ca.crt"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dep := get[appsv1.Deployment](t, render(t, Options{Set: tc.set}), "Deployment", "eraser-controller-manager")
			spec := dep.Spec.Template.Spec
			volumes := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				volumes[v.Name] = v
			}
			got := map[string]string{}
			for _, e := range spec.Containers[0].Env {
				if e.Name != "SSL_CERT_DIR" {
					continue
				}
				for _, m := range spec.Containers[0].VolumeMounts {
					if cm := volumes[m.Name].ConfigMap; m.MountPath == e.Value && cm != nil && len(cm.Items) == 1 {
						got[e.Value] = cm.Name + "/" + cm.Items[0].Key
					}
				}
				if got[e.Value] == "" {
					got[e.Value] = "nothing mounted"
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("SSL_CERT_DIR -> ConfigMap/key (-want +got):\n%s", diff)
			}
		})
	}
}
