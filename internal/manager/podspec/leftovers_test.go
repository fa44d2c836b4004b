package podspec

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

func TestLeftoverArgs(t *testing.T) {
	cases := map[string]struct {
		in   config.Leftovers
		want []string
	}{
		"off: the remover looks and reports": {},
		"reclaimed kinds, namespaces, lease age": {
			in:   config.Leftovers{Reclaim: []string{"unnamed-image", "other-namespace"}, Namespaces: []string{"default"}, LeaseAge: 48 * time.Hour},
			want: []string{"--reclaim=unnamed-image,other-namespace", "--reclaim-namespaces=default", "--lease-age=48h0m0s"},
		},
		"record age alone": {
			in:   config.Leftovers{RecordAge: 30 * time.Minute},
			want: []string{"--record-age=30m0s"},
		},
		"every setting": {
			in:   config.Leftovers{Reclaim: []string{"unreferenced"}, LeaseAge: 2 * time.Hour, RecordAge: 6 * time.Hour},
			want: []string{"--reclaim=unreferenced", "--lease-age=2h0m0s", "--record-age=6h0m0s"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, leftoverArgs(c.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestGrantCRIOReclaim: the remover, and it alone, writes to CRI-O's
// store, mounts its run root and holds the two capabilities, only where
// the policy reclaims one of CRI-O's kinds on a Linux CRI-O node.
func TestGrantCRIOReclaim(t *testing.T) {
	type grant struct {
		RunRoot   string // the remover's run root mount and flag
		Writable  []string
		Caps      []corev1.Capability
		ReadsOnly []string // containers whose image store mount is read-only
		HostFiles []string // the remover's read-only mounts of the node's files
	}
	hostFiles := []string{"/host/etc/crio", "/host/etc/containers", "/host/var/tmp"}
	cases := map[string]struct {
		doc  string
		kind Kind
		os   podpaths.OS
		want grant
	}{
		"containerd's kinds on CRI-O: read only": {
			doc: "manager: {runtime: {name: crio}, leftovers: {reclaim: [unnamed-image]}}", kind: KindManual, os: podpaths.Linux,
			want: grant{ReadsOnly: []string{RemoverContainer}},
		},
		"CRI-O's kinds on containerd": {
			doc: "manager: {runtime: {name: containerd}, leftovers: {reclaim: [orphan-container]}}", kind: KindManual, os: podpaths.Linux,
		},
		"an ImageList's run on CRI-O": {
			doc: "manager: {runtime: {name: crio}, leftovers: {reclaim: [orphan-container]}}", kind: KindManual, os: podpaths.Linux,
			want: grant{RunRoot: "/run/containers/storage", Writable: []string{RemoverContainer}, Caps: []corev1.Capability{"DAC_OVERRIDE", "FOWNER"}, HostFiles: hostFiles},
		},
		"a scheduled run, run root moved": {
			doc:  "manager: {runtime: {name: crio}, leftovers: {reclaim: [unreferenced-layer], crioRunRoot: /var/run/cs}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: false}}",
			kind: KindCollector, os: podpaths.Linux,
			want: grant{RunRoot: "/var/run/cs", Writable: []string{RemoverContainer}, Caps: []corev1.Capability{"DAC_OVERRIDE", "FOWNER"}, HostFiles: hostFiles},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			pod, err := Build(Params{References: testRefs, Job: "j", Kind: c.kind, Node: "n", OS: c.os, ConfigMap: "j", ConfigKey: "c.yaml", Config: cfg(t, c.doc)})
			if err != nil {
				t.Fatal(err)
			}
			var got grant
			for _, v := range pod.Spec.Volumes {
				if v.Name == volCRIORunRoot {
					got.RunRoot = v.HostPath.Path
				}
			}
			for _, ctr := range pod.Spec.Containers {
				for _, m := range ctr.VolumeMounts {
					switch {
					case m.Name == volImageFs && m.ReadOnly:
						got.ReadsOnly = append(got.ReadsOnly, ctr.Name)
					case m.Name == volImageFs:
						got.Writable = append(got.Writable, ctr.Name)
					case m.Name == volCRIORunRoot && (ctr.Name != RemoverContainer || m.MountPath != got.RunRoot || !slices.Contains(ctr.Args, "--crio-run-root="+got.RunRoot)):
						t.Errorf("%s mounts the run root at %s with args %v", ctr.Name, m.MountPath, ctr.Args)
					case slices.ContainsFunc(podpaths.CRIOHostFiles, func(d podpaths.HostDir) bool { return d.Volume == m.Name }):
						if ctr.Name != RemoverContainer || !m.ReadOnly || !slices.Contains(ctr.Args, "--crio-host-root=/host") {
							t.Errorf("%s mounts %s (read-only: %v) with args %v", ctr.Name, m.Name, m.ReadOnly, ctr.Args)
						}
						got.HostFiles = append(got.HostFiles, m.MountPath)
					}
				}
				if sc := ctr.SecurityContext; sc != nil && sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
					if ctr.Name != RemoverContainer {
						t.Errorf("%s holds %v", ctr.Name, sc.Capabilities.Add)
					}
					got.Caps = sc.Capabilities.Add
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
