package protect

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

var (
	pulled   = cri.Image{ID: "sha256:" + strings.Repeat("a", 64), Tags: []string{"docker.io/library/app:1"}, Digests: []string{"docker.io/library/app@sha256:" + strings.Repeat("b", 64)}}
	imported = cri.Image{ID: "sha256:" + strings.Repeat("c", 64), Tags: []string{"docker.io/library/airgap:1"}}
)

func TestCannotBePulledBack(t *testing.T) {
	cases := map[string]struct {
		s    Subject
		want Verdict
	}{
		"pulled":                 {s: Subject{Image: pulled, Cluster: Cluster{KeepNotRepullable: true}}},
		"imported":               {s: Subject{Image: imported, Cluster: Cluster{KeepNotRepullable: true}}, want: Verdict{workerresult.NotRepullable, "no repository digest: imported or built on the node, not pulled; only an ImageList that names it removes it"}},
		"localhost digest only":  {s: Subject{Image: cri.Image{Tags: []string{"localhost/a:1"}, Digests: []string{"localhost/a@sha256:" + strings.Repeat("d", 64)}}, Cluster: Cluster{KeepNotRepullable: true}}, want: Verdict{workerresult.NotRepullable, "repository digest on localhost/ only: imported or built on the node, not pulled; only an ImageList that names it removes it"}},
		"switched off":           {s: Subject{Image: imported}},
		"vulnerable is kept too": {s: Subject{Image: imported, Vulnerable: true, Cluster: Cluster{KeepNotRepullable: true}}, want: Verdict{workerresult.NotRepullable, "no repository digest: imported or built on the node, not pulled; only an ImageList that names it removes it"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, verdictOf(cannotBePulledBack, workerresult.NotRepullable, &tc.s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReferencedByWorkload(t *testing.T) {
	onNode := &Referrer{Owner: "Pod shop/web-0", OnNode: true}
	template := &Referrer{Owner: "CronJob batch/nightly"}
	pending := &Referrer{Owner: "Pod shop/web-1"}
	cases := map[string]struct {
		c          Cluster
		ref        *Referrer
		vulnerable bool
		want       Verdict
	}{
		"not referenced":                       {c: Cluster{Read: true}},
		"references not read":                  {c: Cluster{}, ref: template},
		"a pod on this node":                   {c: Cluster{Read: true}, ref: onNode, want: Verdict{workerresult.Referenced, "pod shop/web-0 on this node"}},
		"a template":                           {c: Cluster{Read: true}, ref: template, want: Verdict{workerresult.Referenced, "referenced by CronJob batch/nightly"}},
		"a pod not yet scheduled":              {c: Cluster{Read: true}, ref: pending, want: Verdict{workerresult.Referenced, "referenced by Pod shop/web-1, not yet scheduled"}},
		"vulnerable, template only":            {c: Cluster{Read: true, RemoveVulnerable: true}, ref: template, vulnerable: true},
		"vulnerable, template, switched off":   {c: Cluster{Read: true}, ref: template, vulnerable: true, want: Verdict{workerresult.Referenced, "referenced by CronJob batch/nightly"}},
		"vulnerable, the node's pod":           {c: Cluster{Read: true, RemoveVulnerable: true}, ref: onNode, vulnerable: true, want: Verdict{workerresult.Referenced, "pod shop/web-0 on this node"}},
		"vulnerable, template, node set short": {c: Cluster{Read: true, RemoveVulnerable: true, NodeIncomplete: true}, ref: template, vulnerable: true, want: Verdict{workerresult.Referenced, "referenced by CronJob batch/nightly"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := Subject{Image: pulled, Cluster: tc.c, Referrer: tc.ref, Vulnerable: tc.vulnerable}
			if diff := cmp.Diff(tc.want, verdictOf(referencedByWorkload, workerresult.Referenced, &s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReferencesIncomplete(t *testing.T) {
	const node = "the node's pods reference more images than their set can carry: every image is kept from the automatic policies"
	const cluster = "the cluster's references could not be written whole for this run: every image is kept from the automatic policies"
	template := &Referrer{Owner: "Deployment shop/web"}
	cases := map[string]struct {
		c    Cluster
		ref  *Referrer
		want Verdict
	}{
		"complete":                          {c: Cluster{Read: true}},
		"not read":                          {c: Cluster{NodeIncomplete: true, ClusterIncomplete: true}},
		"node set short":                    {c: Cluster{Read: true, NodeIncomplete: true}, want: Verdict{workerresult.Referenced, node}},
		"node set short, template image":    {c: Cluster{Read: true, NodeIncomplete: true}, ref: template, want: Verdict{workerresult.Referenced, node}},
		"cluster set short":                 {c: Cluster{Read: true, ClusterIncomplete: true}, want: Verdict{workerresult.Referenced, cluster}},
		"cluster set short, template image": {c: Cluster{Read: true, ClusterIncomplete: true}, ref: template},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := Subject{Image: pulled, Cluster: tc.c, Referrer: tc.ref, Vulnerable: true}
			if diff := cmp.Diff(tc.want, verdictOf(referencesIncomplete, workerresult.Referenced, &s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTooYoung(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		s    Subject
		want Verdict
	}{
		"old enough":         {s: Subject{Now: now, MinAge: 10 * time.Minute, Arrived: now.Add(-10 * time.Minute)}},
		"young":              {s: Subject{Now: now, MinAge: 10 * time.Minute, Arrived: now.Add(-9 * time.Minute)}, want: Verdict{workerresult.TooYoung, "arrived 9m0s ago, under the minimum age 10m0s"}},
		"young, first seen":  {s: Subject{Now: now, MinAge: time.Hour, Arrived: now.Add(-time.Minute), AgeNote: " (counted from when Eraser first saw it)"}, want: Verdict{workerresult.TooYoung, "arrived 1m0s ago, under the minimum age 1h0m0s (counted from when Eraser first saw it)"}},
		"no minimum age":     {s: Subject{Now: now, Arrived: now}},
		"age unknown is old": {s: Subject{Now: now, MinAge: time.Hour}},
		"no clock":           {s: Subject{MinAge: time.Hour, Arrived: now}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, verdictOf(tooYoung, workerresult.TooYoung, &tc.s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestJudgeOrder: where several rules keep an image, the first of the
// chain names the reason, and each scope applies its own rules alone.
func TestJudgeOrder(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	everything := Subject{
		Image:    cri.Image{ID: imported.ID, Tags: imported.Tags, Pinned: true},
		Used:     NewContainers([]cri.Container{{Name: "c", ImageID: imported.ID}}),
		Policy:   Policy{GuessPause: true},
		Cluster:  Cluster{Read: true, KeepNotRepullable: true, NodeIncomplete: true},
		Referrer: &Referrer{Owner: "Pod shop/web-0", OnNode: true},
		Now:      now, MinAge: time.Hour, Arrived: now,
	}
	everything.Keys = Keys(everything.Image)
	drop := map[string]func(*Subject){
		"in use":          func(s *Subject) { s.Used = Containers{} },
		"pinned":          func(s *Subject) { s.Image.Pinned = false },
		"not re-pullable": func(s *Subject) { s.Cluster.KeepNotRepullable = false },
		"referenced":      func(s *Subject) { s.Referrer = nil },
		"incomplete":      func(s *Subject) { s.Cluster.NodeIncomplete = false },
		"too young":       func(s *Subject) { s.MinAge = 0 },
	}
	type verdicts struct{ Always, Automatic Verdict }
	got := map[string]verdicts{}
	s := everything
	for _, step := range []string{"in use", "pinned", "not re-pullable", "referenced", "incomplete", "too young"} {
		got["before dropping "+step] = verdicts{Judge(&s, Always), Judge(&s, Automatic)}
		drop[step](&s)
	}
	got["nothing left"] = verdicts{Judge(&s, Always), Judge(&s, Automatic)}
	const notRepullable = "no repository digest: imported or built on the node, not pulled; only an ImageList that names it removes it"
	want := map[string]verdicts{
		"before dropping in use":          {Verdict{workerresult.InUse, "container c"}, Verdict{workerresult.NotRepullable, notRepullable}},
		"before dropping pinned":          {Verdict{workerresult.Pinned, "pinned by the runtime"}, Verdict{workerresult.NotRepullable, notRepullable}},
		"before dropping not re-pullable": {Verdict{}, Verdict{workerresult.NotRepullable, notRepullable}},
		"before dropping referenced":      {Verdict{}, Verdict{workerresult.Referenced, "pod shop/web-0 on this node"}},
		"before dropping incomplete":      {Verdict{}, Verdict{workerresult.Referenced, "the node's pods reference more images than their set can carry: every image is kept from the automatic policies"}},
		"before dropping too young":       {Verdict{}, Verdict{workerresult.TooYoung, "arrived 0s ago, under the minimum age 1h0m0s"}},
		"nothing left":                    {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestUsedNow(t *testing.T) {
	cases := map[string]struct {
		img        cri.Image
		containers []cri.Container
		want       Verdict
	}{
		"used":                      {img: pulled, containers: []cri.Container{{Name: "c", ImageRef: pulled.ID}}, want: Verdict{workerresult.InUse, "container c"}},
		"unused":                    {img: pulled, containers: []cri.Container{{Name: "c", ImageRef: imported.ID}}},
		"pinned is not a container": {img: cri.Image{ID: imported.ID, Pinned: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, UsedNow(tc.img, NewContainers(tc.containers))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestChainDocumented: docs/protection.md lists the chain's rules in the
// code's order, each with its reason and scope, so that what operators
// read is what the nodes do.
func TestChainDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/protection.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "<!-- keep rules: begin -->")
	section, _, ok2 := strings.Cut(section, "<!-- keep rules: end -->")
	if !ok || !ok2 {
		t.Fatal("docs/protection.md has no keep rules table between its markers")
	}
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| ([^|]+?) \\| `([^`]+)` \\| ([^|]+?) \\|")
	var got []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		got = append(got, m[1]+" "+m[2]+" / "+m[3]+" / "+m[4])
	}
	var want []string
	for i, r := range Chain() {
		want = append(want, strconv.Itoa(i+1)+" "+r.Name+" / "+string(r.Reason)+" / "+r.Scope.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/protection.md's keep rules differ from the chain (-code +doc):\n%s", diff)
	}
}

// verdictOf runs one rule as the chain would.
func verdictOf(keep func(*Subject) (string, bool), reason workerresult.Outcome, s *Subject) Verdict {
	if detail, ok := keep(s); ok {
		return Verdict{Reason: reason, Detail: detail}
	}
	return Verdict{}
}

// TestChainAlwaysFirst: a run applies the rules of every removal when it
// reads the node and the automatic ones per candidate later; that is the
// chain's order only while no automatic rule stands before an always one.
func TestChainAlwaysFirst(t *testing.T) {
	seenAutomatic := false
	for _, r := range Chain() {
		switch r.Scope {
		case Automatic:
			seenAutomatic = true
		case Always:
			if seenAutomatic {
				t.Errorf("rule %q applies always but stands after an automatic rule", r.Name)
			}
		default:
			t.Errorf("rule %q has no scope", r.Name)
		}
	}
}
