package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLeftovers(t *testing.T) {
	cases := map[string]struct {
		runtime  string // containerd unless set
		doc      string
		want     Leftovers
		warnings []string // substrings, in order
		err      []string // substrings of the error
	}{
		"off by default": {doc: "{}"},
		"every key": {
			doc:  "{reclaim: [unnamed-image, other-namespace, old-lease, unreferenced, old-lease], namespaces: [default, moby], leaseAge: 48h, recordAge: 2h}",
			want: Leftovers{Reclaim: []string{"unnamed-image", "other-namespace", "old-lease", "unreferenced"}, Namespaces: []string{"default", "moby"}, LeaseAge: 48 * time.Hour, RecordAge: 2 * time.Hour},
		},
		"namespaces without other-namespace": {
			doc:      "{reclaim: [unnamed-image], namespaces: [default]}",
			want:     Leftovers{Reclaim: []string{"unnamed-image"}, Namespaces: []string{"default"}},
			warnings: []string{"manager.leftovers.namespaces: has no effect unless reclaim lists other-namespace or old-lease"},
		},
		"namespaces for old-lease alone": {
			doc:  "{reclaim: [old-lease], namespaces: [tools]}",
			want: Leftovers{Reclaim: []string{"old-lease"}, Namespaces: []string{"tools"}},
		},
		"other-namespace without namespaces": {
			doc:      "{reclaim: [other-namespace]}",
			want:     Leftovers{Reclaim: []string{"other-namespace"}},
			warnings: []string{"manager.leftovers.reclaim: other-namespace reclaims nothing until namespaces names one"},
		},
		"a gc.root is never reclaimed": {doc: "{reclaim: [gc-root]}", err: []string{`manager.leftovers.reclaim[0]: Unsupported value: "gc-root"`}},
		"the kubelet's namespace":      {doc: "{reclaim: [other-namespace], namespaces: [k8s.io]}", err: []string{"manager.leftovers.namespaces[0]", "the kubelet's namespace"}},
		"a lease age a pull outlives":  {doc: "{leaseAge: 10m}", err: []string{"manager.leftovers.leaseAge", "at least 1h0m0s"}},
		"not a duration":               {doc: "{leaseAge: a day}", err: []string{"manager.leftovers.leaseAge"}},
		"CRI-O's kinds and run root": {
			runtime: "crio",
			doc:     "{reclaim: [orphan-container, unreferenced-layer, incomplete-layer], crioRunRoot: /var/run/crio-storage}",
			want:    Leftovers{Reclaim: []string{"orphan-container", "unreferenced-layer", "incomplete-layer"}, CRIORunRoot: "/var/run/crio-storage"},
		},
		"containerd's kinds on CRI-O nodes": {
			runtime:  "crio",
			doc:      "{reclaim: [unnamed-image, orphan-container]}",
			want:     Leftovers{Reclaim: []string{"unnamed-image", "orphan-container"}},
			warnings: []string{"manager.leftovers.reclaim: unnamed-image is not a leftover of crio nodes: it reclaims nothing there"},
		},
		"CRI-O's kinds on containerd nodes": {
			doc:      "{reclaim: [orphan-container]}",
			want:     Leftovers{Reclaim: []string{"orphan-container"}},
			warnings: []string{"manager.leftovers.reclaim: orphan-container is not a leftover of containerd nodes: it reclaims nothing there"},
		},
		"a relative run root":          {runtime: "crio", doc: "{crioRunRoot: run/containers}", err: []string{"manager.leftovers.crioRunRoot", "absolute"}},
		"the root as run root":         {runtime: "crio", doc: "{crioRunRoot: /}", err: []string{"manager.leftovers.crioRunRoot"}},
		"a run root outside /run":      {runtime: "crio", doc: "{crioRunRoot: /etc/containers}", err: []string{"manager.leftovers.crioRunRoot", "under /run or /var/run"}},
		"/run itself as run root":      {runtime: "crio", doc: "{crioRunRoot: /run}", err: []string{"manager.leftovers.crioRunRoot", "under /run or /var/run"}},
		"a run root out of /run by ..": {runtime: "crio", doc: "{crioRunRoot: /run/../etc}", err: []string{"manager.leftovers.crioRunRoot", "clean"}},
		"a run root under /run":        {runtime: "crio", doc: "{crioRunRoot: /run/crio/storage}", want: Leftovers{CRIORunRoot: "/run/crio/storage"}},
		"the least record age":         {doc: "{recordAge: 10m}", want: Leftovers{RecordAge: 10 * time.Minute}},
		"a record age a pull outlives": {doc: "{recordAge: 5m}", err: []string{"manager.leftovers.recordAge", "at least 10m0s", "a pull in progress"}},
		"a record age of zero":         {doc: "{recordAge: 0}", err: []string{"manager.leftovers.recordAge", "greater than zero"}},
		"a negative record age":        {doc: "{recordAge: -1h}", err: []string{"manager.leftovers.recordAge", "must not be negative"}},
		"a record age not a duration":  {doc: "{recordAge: an hour}", err: []string{"manager.leftovers.recordAge", "must be a duration"}},
		"a misspelt record age":        {doc: "{recordsAge: 2h}", err: []string{"recordsAge"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			runtime := c.runtime
			if runtime == "" {
				runtime = "containerd"
			}
			cfg, warnings, err := Parse([]byte("apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: " + runtime + "}, leftovers: " + c.doc + "}"))
			if len(c.err) > 0 {
				if err == nil {
					t.Fatalf("no error, want one with %q", c.err)
				}
				for _, s := range c.err {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, cfg.Manager.Leftovers); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var got []string
			for _, w := range warnings {
				if strings.Contains(w, "leftovers") {
					got = append(got, w)
				}
			}
			if diff := cmp.Diff(c.warnings, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReclaimsOnCRIO(t *testing.T) {
	cases := map[string]struct {
		reclaim []string
		want    bool
	}{
		"none":              {},
		"containerd's only": {reclaim: []string{"unnamed-image", "unreferenced"}},
		"one of CRI-O's":    {reclaim: []string{"unnamed-image", "incomplete-layer"}, want: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (Leftovers{Reclaim: c.reclaim}).ReclaimsOnCRIO(); got != c.want {
				t.Errorf("ReclaimsOnCRIO() = %v, want %v", got, c.want)
			}
		})
	}
}
