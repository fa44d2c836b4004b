package reclaim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

func TestParseKinds(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    map[leftoverkind.Kind]bool
		wantErr bool
	}{
		"none":              {in: "", want: map[leftoverkind.Kind]bool{}},
		"two, spaced":       {in: "unnamed-image, old-lease", want: map[leftoverkind.Kind]bool{leftoverkind.UnnamedImage: true, leftoverkind.OldLease: true}},
		"a gc.root is kept": {in: "gc-root", wantErr: true},
		"a held lease too":  {in: "held-lease", wantErr: true},
		"CRI-O's":           {in: "orphan-container,unreferenced-layer", want: map[leftoverkind.Kind]bool{leftoverkind.OrphanContainer: true, leftoverkind.UnreferencedLayer: true}},
		"a typo":            {in: "unamed-image", wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseKinds(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, want error %v", err, c.wantErr)
			}
			if diff := cmp.Diff(c.want, got); !c.wantErr && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	found := []leftover.Leftover{
		{Kind: leftoverkind.UnnamedImage, Namespace: "k8s.io", Name: "sha256:a"},
		{Kind: leftoverkind.OtherNamespace, Namespace: "default", Name: "busybox:1"},
		{Kind: leftoverkind.OtherNamespace, Namespace: "moby", Name: "nginx:1"},
		{Kind: leftoverkind.OldLease, Namespace: "k8s.io", Name: "lease"},
		{Kind: leftoverkind.OldLease, Namespace: "moby", Name: "moby-lease"},
		{Kind: leftoverkind.OldLease, Namespace: "tools", Name: "tools-lease"},
		{Kind: leftoverkind.HeldLease, Namespace: "k8s.io", Name: "held"},
		{Kind: leftoverkind.GCRoot, Namespace: "k8s.io", Name: "sha256:r"},
		{Kind: leftoverkind.GCRoot, Namespace: "buildkit", Name: "sha256:pinned"},
		{Kind: leftoverkind.Unreferenced, Namespace: "buildkit", Name: "overlayfs/1"},
	}
	cases := map[string]struct {
		p         Policy
		take      []string
		listedWhy map[string]string
	}{
		"off: everything listed": {
			listedWhy: map[string]string{"sha256:a": "", "busybox:1": "", "nginx:1": "", "lease": "", "moby-lease": "", "tools-lease": "", "held": "", "sha256:r": "", "sha256:pinned": "", "overlayfs/1": ""},
		},
		"other namespaces only when named": {
			p:    Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.OtherNamespace: true, leftoverkind.UnnamedImage: true}, Namespaces: map[string]bool{"default": true}},
			take: []string{"sha256:a", "busybox:1"},
			listedWhy: map[string]string{"nginx:1": "namespace moby is not named for reclaiming", "lease": "", "moby-lease": "", "tools-lease": "", "held": "",
				"sha256:r": "", "sha256:pinned": "", "overlayfs/1": ""},
		},
		"old leases of the kubelet's namespace alone by default": {
			p:    Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.OldLease: true}},
			take: []string{"lease"},
			listedWhy: map[string]string{"sha256:a": "", "busybox:1": "", "nginx:1": "", "moby-lease": "namespace moby is not named for reclaiming",
				"tools-lease": "namespace tools is not named for reclaiming", "held": "", "sha256:r": "", "sha256:pinned": "", "overlayfs/1": ""},
		},
		"old leases of a namespace named": {
			p:    Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.OldLease: true}, Namespaces: map[string]bool{"tools": true}},
			take: []string{"lease", "tools-lease"},
			listedWhy: map[string]string{"sha256:a": "", "busybox:1": "", "nginx:1": "", "moby-lease": "namespace moby is not named for reclaiming",
				"held": "", "sha256:r": "", "sha256:pinned": "", "overlayfs/1": ""},
		},
		"unreferenced: containerd's own collection, whatever the namespace": {
			p:    Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.Unreferenced: true}},
			take: []string{"overlayfs/1"},
			listedWhy: map[string]string{"sha256:a": "", "busybox:1": "", "nginx:1": "", "lease": "", "moby-lease": "", "tools-lease": "", "held": "",
				"sha256:r": "", "sha256:pinned": ""},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			take, listed := Decide(found, c.p)
			var gotTake []string
			for _, l := range take {
				gotTake = append(gotTake, l.Name)
			}
			gotListed := map[string]string{}
			for _, r := range listed {
				if r.Outcome != Found {
					t.Errorf("%s listed as %q", r.Name, r.Outcome)
				}
				gotListed[r.Name] = r.Detail
			}
			if diff := cmp.Diff(c.take, gotTake); diff != "" {
				t.Errorf("taken (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.listedWhy, gotListed); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
		})
	}
}
