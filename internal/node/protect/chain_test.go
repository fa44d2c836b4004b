package protect

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

var (
	pulled   = cri.Image{ID: "sha256:" + strings.Repeat("a", 64), Tags: []string{"docker.io/library/app:1"}, Digests: []string{"docker.io/library/app@sha256:" + strings.Repeat("b", 64)}}
	imported = cri.Image{ID: "sha256:" + strings.Repeat("c", 64), Tags: []string{"docker.io/library/airgap:1"}}
)

func TestCannotBePulledBack(t *testing.T) {
	cases := map[string]struct {
		s    Subject
		want Decision
	}{
		"pulled":                 {s: Subject{Image: pulled, Cluster: Cluster{KeepNotRepullable: true}}},
		"imported":               {s: Subject{Image: imported, Cluster: Cluster{KeepNotRepullable: true}}, want: Decision{workerresult.NotRepullable, "no repository digest: imported or built on the node, not pulled; only an ImageList that names it removes it"}},
		"localhost digest only":  {s: Subject{Image: cri.Image{Tags: []string{"localhost/a:1"}, Digests: []string{"localhost/a@sha256:" + strings.Repeat("d", 64)}}, Cluster: Cluster{KeepNotRepullable: true}}, want: Decision{workerresult.NotRepullable, "repository digest on localhost/ only: imported or built on the node, not pulled; only an ImageList that names it removes it"}},
		"switched off":           {s: Subject{Image: imported}},
		"vulnerable is kept too": {s: Subject{Image: imported, Vulnerable: true, Cluster: Cluster{KeepNotRepullable: true}}, want: Decision{workerresult.NotRepullable, "no repository digest: imported or built on the node, not pulled; only an ImageList that names it removes it"}},
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
		want       Decision
	}{
		"not referenced":                       {c: Cluster{Read: true}},
		"references not read":                  {c: Cluster{}, ref: template},
		"a pod on this node":                   {c: Cluster{Read: true}, ref: onNode, want: Decision{workerresult.Referenced, "pod shop/web-0 on this node"}},
		"a template":                           {c: Cluster{Read: true}, ref: template, want: Decision{workerresult.Referenced, "referenced by CronJob batch/nightly"}},
		"a pod not yet scheduled":              {c: Cluster{Read: true}, ref: pending, want: Decision{workerresult.Referenced, "referenced by Pod shop/web-1, not yet scheduled"}},
		"vulnerable, template only":            {c: Cluster{Read: true, RemoveVulnerable: true}, ref: template, vulnerable: true},
		"vulnerable, template, switched off":   {c: Cluster{Read: true}, ref: template, vulnerable: true, want: Decision{workerresult.Referenced, "referenced by CronJob batch/nightly"}},
		"vulnerable, the node's pod":           {c: Cluster{Read: true, RemoveVulnerable: true}, ref: onNode, vulnerable: true, want: Decision{workerresult.Referenced, "pod shop/web-0 on this node"}},
		"vulnerable, template, node set short": {c: Cluster{Read: true, RemoveVulnerable: true, NodeIncomplete: true}, ref: template, vulnerable: true, want: Decision{workerresult.Referenced, "referenced by CronJob batch/nightly"}},
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
		want Decision
	}{
		"complete":                          {c: Cluster{Read: true}},
		"not read":                          {c: Cluster{NodeIncomplete: true, ClusterIncomplete: true}},
		"node set short":                    {c: Cluster{Read: true, NodeIncomplete: true}, want: Decision{workerresult.Referenced, node}},
		"node set short, template image":    {c: Cluster{Read: true, NodeIncomplete: true}, ref: template, want: Decision{workerresult.Referenced, node}},
		"cluster set short":                 {c: Cluster{Read: true, ClusterIncomplete: true}, want: Decision{workerresult.Referenced, cluster}},
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
		want Decision
	}{
		"old enough":         {s: Subject{Now: now, MinAge: 10 * time.Minute, Arrived: now.Add(-10 * time.Minute)}},
		"young":              {s: Subject{Now: now, MinAge: 10 * time.Minute, Arrived: now.Add(-9 * time.Minute)}, want: Decision{workerresult.TooYoung, "arrived 9m0s ago, under the minimum age 10m0s"}},
		"young, first seen":  {s: Subject{Now: now, MinAge: time.Hour, Arrived: now.Add(-time.Minute), AgeNote: " (counted from when Eraser first saw it)"}, want: Decision{workerresult.TooYoung, "arrived 1m0s ago, under the minimum age 1h0m0s (counted from when Eraser first saw it)"}},
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

// ruleFact makes one rule of the chain keep the image of ruleSubject:
// set changes the subject or adds to the node's containers.
type ruleFact struct {
	rule string
	set  func(*Subject, *[]cri.Container)
}

// ruleFacts are a fact for each rule, in the chain's order.
var ruleFacts = []ruleFact{
	{"uses", func(_ *Subject, cs *[]cri.Container) { *cs = append(*cs, cri.Container{Name: "c", ImageID: pause.ID}) }},
	{"mounts", func(_ *Subject, cs *[]cri.Container) {
		*cs = append(*cs, cri.Container{Name: "m", Image: "app:1", MountedImages: []string{pause.Tags[0]}})
	}},
	{"pinned", func(s *Subject, _ *[]cri.Container) { s.Image.Pinned = true }},
	{"sandbox", func(s *Subject, _ *[]cri.Container) { s.Policy.SandboxImage = pause.Tags[0] }},
	{"guessed pause", func(s *Subject, _ *[]cri.Container) { s.Policy.GuessPause = true }},
	{"excluded", func(s *Subject, _ *[]cri.Container) {
		s.Policy.Exclusions = []imageref.Pattern{imageref.ParsePattern("registry.k8s.io/pause:*")}
	}},
	{"not re-pullable", func(s *Subject, _ *[]cri.Container) { s.Cluster.KeepNotRepullable = true }},
	{"referenced", func(s *Subject, _ *[]cri.Container) { s.Referrer = &Referrer{Owner: "CronJob batch/nightly"} }},
	{"incomplete", func(s *Subject, _ *[]cri.Container) { s.Cluster.NodeIncomplete = true }},
	{"too young", func(s *Subject, _ *[]cri.Container) { s.MinAge = time.Hour }},
}

// pause is an image every rule of the chain can keep: it looks like a
// pause image and no registry can give it back.
var pause = cri.Image{ID: "sha256:" + strings.Repeat("e", 64), Tags: []string{"registry.k8s.io/pause:3.9"}}

// ruleSubject is pause, with the facts that make the named rules keep it.
func ruleSubject(t *testing.T, rules ...string) *Subject {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := &Subject{Image: pause, Keys: Keys(pause), Cluster: Cluster{Read: true}, Now: now, Arrived: now.Add(-time.Minute)}
	var containers []cri.Container
	for _, r := range rules {
		i := slices.IndexFunc(ruleFacts, func(f ruleFact) bool { return f.rule == r })
		if i < 0 {
			t.Fatalf("no fact for rule %q", r)
		}
		ruleFacts[i].set(s, &containers)
	}
	s.Used = NewContainers(containers)
	return s
}

// judged is the verdict an ImageList naming the image gets, and the one an
// automatic policy gets: the rules of every removal, then, for what they
// leave, the automatic ones, as the remover applies them.
type judged struct{ ImageList, Automatic Decision }

func judgeBoth(s *Subject) judged {
	v := Judge(s, Always)
	if v.Reason == Removable {
		return judged{ImageList: v, Automatic: Judge(s, Automatic)}
	}
	return judged{ImageList: v, Automatic: v}
}

// TestJudgeOrder: where several rules keep an image, the first of the
// chain names the reason; an ImageList naming the image meets the rules
// of every removal alone.
func TestJudgeOrder(t *testing.T) {
	const (
		notRepullable = "no repository digest: imported or built on the node, not pulled; only an ImageList that names it removes it"
		incomplete    = "the node's pods reference more images than their set can carry: every image is kept from the automatic policies"
	)
	inUse := Decision{workerresult.InUse, "container c"}
	cases := map[string]struct {
		rules []string
		want  judged
	}{
		"none":                             {},
		"used and mounted":                 {rules: []string{"mounts", "uses"}, want: judged{inUse, inUse}},
		"mounted and pinned":               {rules: []string{"pinned", "mounts"}, want: judged{Decision{workerresult.InUse, "container m mounts it as an image volume"}, Decision{workerresult.InUse, "container m mounts it as an image volume"}}},
		"used and excluded":                {rules: []string{"excluded", "uses"}, want: judged{inUse, inUse}},
		"pinned and the sandbox image":     {rules: []string{"sandbox", "pinned"}, want: judged{Decision{workerresult.Pinned, "pinned by the runtime"}, Decision{workerresult.Pinned, "pinned by the runtime"}}},
		"the sandbox image and a guess":    {rules: []string{"guessed pause", "sandbox"}, want: judged{Decision{workerresult.Pinned, "the runtime's sandbox image"}, Decision{workerresult.Pinned, "the runtime's sandbox image"}}},
		"a guessed pause and excluded":     {rules: []string{"excluded", "guessed pause"}, want: judged{Decision{workerresult.Pinned, guessDetail}, Decision{workerresult.Pinned, guessDetail}}},
		"excluded and not re-pullable":     {rules: []string{"not re-pullable", "excluded"}, want: judged{Decision{workerresult.Excluded, "exclusion registry.k8s.io/pause:*"}, Decision{workerresult.Excluded, "exclusion registry.k8s.io/pause:*"}}},
		"excluded and too young":           {rules: []string{"too young", "excluded"}, want: judged{Decision{workerresult.Excluded, "exclusion registry.k8s.io/pause:*"}, Decision{workerresult.Excluded, "exclusion registry.k8s.io/pause:*"}}},
		"not re-pullable and referenced":   {rules: []string{"referenced", "not re-pullable"}, want: judged{Automatic: Decision{workerresult.NotRepullable, notRepullable}}},
		"referenced and incomplete":        {rules: []string{"incomplete", "referenced"}, want: judged{Automatic: Decision{workerresult.Referenced, "referenced by CronJob batch/nightly"}}},
		"incomplete and too young":         {rules: []string{"too young", "incomplete"}, want: judged{Automatic: Decision{workerresult.Referenced, incomplete}}},
		"the automatic rules, all of them": {rules: []string{"too young", "incomplete", "referenced", "not re-pullable"}, want: judged{Automatic: Decision{workerresult.NotRepullable, notRepullable}}},
		"every rule":                       {rules: []string{"too young", "incomplete", "referenced", "not re-pullable", "excluded", "guessed pause", "sandbox", "pinned", "mounts", "uses"}, want: judged{inUse, inUse}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, judgeBoth(ruleSubject(t, tc.rules...))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestJudgeFirstWins: for every two rules, the image both keep gets the
// verdict of the one earlier in the chain, as if it alone kept it; and
// each fact makes its own rule keep the image, no other.
func TestJudgeFirstWins(t *testing.T) {
	chain := Chain()
	if len(ruleFacts) != len(chain) {
		t.Fatalf("ruleFacts has %d facts for the chain's %d rules: give the new rule its fact", len(ruleFacts), len(chain))
	}
	for i, f := range ruleFacts {
		v := judgeBoth(ruleSubject(t, f.rule)).Automatic
		if detail, ok := chain[i].keep(ruleSubject(t, f.rule)); !ok || v != (Decision{chain[i].Reason, detail}) {
			t.Errorf("fact %q: verdict %+v, want rule %d (%q) to give it", f.rule, v, i+1, chain[i].Name)
		}
		for _, later := range ruleFacts[i+1:] {
			if got := judgeBoth(ruleSubject(t, later.rule, f.rule)); got.Automatic != v {
				t.Errorf("rules %q and %q: %+v, want the first's %+v", f.rule, later.rule, got.Automatic, v)
			}
		}
	}
}

func TestUsedNow(t *testing.T) {
	cases := map[string]struct {
		img        cri.Image
		containers []cri.Container
		want       Decision
	}{
		"used":                      {img: pulled, containers: []cri.Container{{Name: "c", ImageRef: pulled.ID}}, want: Decision{workerresult.InUse, "container c"}},
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
func verdictOf(keep func(*Subject) (string, bool), reason workerresult.Outcome, s *Subject) Decision {
	if detail, ok := keep(s); ok {
		return Decision{Reason: reason, Detail: detail}
	}
	return Decision{}
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
