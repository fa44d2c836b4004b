package podspec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestRegistryCheck: the registry check's flags go to the remover alone,
// and the credentials Secret is mounted read-only into it, on Linux and
// Windows, optional so that a missing Secret holds back no removal.
func TestRegistryCheck(t *testing.T) {
	type shape struct {
		RemoverArgs []string
		Mounts      map[string][]string
		Secret      string
		Optional    bool
	}
	const full = `manager: {retention: {registryCheck: {lookback: 72h, maxRequestsPerRun: 9, timeout: 2s, whenUnreachable: remove, credentialsSecret: creds,
  mirrors: {docker.io: [m1.example, "https://m2.example"], quay.io: [q.example]}, plainHTTP: ["127.0.0.1:5000"]}}}
components: {collector: {enabled: true}}`
	for name, tc := range map[string]struct {
		config string
		os     podpaths.OS
		kind   Kind
		want   shape
	}{
		"default": {kind: KindManual, os: podpaths.Linux, want: shape{RemoverArgs: []string{"--registry-check=true"}}},
		"off":     {config: "manager: {retention: {registryCheck: {enabled: false}}}", kind: KindManual, os: podpaths.Linux, want: shape{RemoverArgs: []string{"--registry-check=false"}}},
		"every key, scheduled": {config: full, kind: KindCollector, os: podpaths.Linux, want: shape{
			RemoverArgs: []string{"--registry-check=true", "--registry-lookback=72h0m0s", "--registry-max-requests=9", "--registry-timeout=2s", "--registry-when-unreachable=remove",
				"--registry-mirror=docker.io=m1.example,https://m2.example", "--registry-mirror=quay.io=q.example", "--registry-plain-http=127.0.0.1:5000",
				"--registry-credentials=/run/eraser.sh/registry-credentials/config.json"},
			Mounts: map[string][]string{"remover": {"registry-credentials:/run/eraser.sh/registry-credentials:ro"}}, Secret: "creds", Optional: true,
		}},
		"credentials on Windows": {config: "manager: {retention: {registryCheck: {credentialsSecret: creds}}}", kind: KindManual, os: podpaths.Windows, want: shape{
			RemoverArgs: []string{"--registry-check=true", `--registry-credentials=C:\run\eraser.sh\registry-credentials\config.json`},
			Mounts:      map[string][]string{"remover": {`registry-credentials:C:\run\eraser.sh\registry-credentials:ro`}}, Secret: "creds", Optional: true,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			c := cfg(t, tc.config)
			if tc.os == podpaths.Windows {
				c.Manager.Runtime.Address = "npipe:////./pipe/containerd-containerd"
			}
			pod, err := Build(Params{References: testRefs, Job: "j", Kind: tc.kind, Node: "n", OS: tc.os, ConfigMap: "j", ConfigKey: "c.yaml", Config: c})
			if err != nil {
				t.Fatal(err)
			}
			var got shape
			for _, ctr := range pod.Spec.Containers {
				for _, a := range ctr.Args {
					if strings.HasPrefix(a, "--registry-") {
						if ctr.Name != RemoverContainer {
							t.Errorf("%s gets %s", ctr.Name, a)
						}
						got.RemoverArgs = append(got.RemoverArgs, a)
					}
				}
				for _, m := range ctr.VolumeMounts {
					if m.Name == podpaths.VolumeRegistryCredentials {
						if got.Mounts == nil {
							got.Mounts = map[string][]string{}
						}
						ro := ""
						if m.ReadOnly {
							ro = ":ro"
						}
						got.Mounts[ctr.Name] = append(got.Mounts[ctr.Name], m.Name+":"+m.MountPath+ro)
					}
				}
			}
			for _, v := range pod.Spec.Volumes {
				if v.Secret != nil && v.Name == podpaths.VolumeRegistryCredentials {
					got.Secret, got.Optional = v.Secret.SecretName, v.Secret.Optional != nil && *v.Secret.Optional
					if diff := cmp.Diff([]corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "config.json"}}, v.Secret.Items); diff != "" {
						t.Errorf("items (-want +got):\n%s", diff)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
