package podspec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// The table of docs/security.md that says what each worker container holds
// is the pod specs' own: TestSecurityDocPrivileges builds the pods for
// every runtime and leftover policy and fails when the table says anything
// else, printing the table as it should read.

const privilegesSection = "## What each worker container holds"

// privilegeNodes are the table's kinds of node, in its order: the runtime
// as the configuration names it, and the scanner a scheduled run there
// runs (the Trivy scanner cannot read cri-dockerd's images).
var privilegeNodes = []struct {
	label string
	os    podpaths.OS
	doc   string
}{
	{"containerd", podpaths.Linux, "manager: {runtime: {name: containerd}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true}}"},
	{"CRI-O", podpaths.Linux, "manager: {runtime: {name: crio}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true}}"},
	{"cri-dockerd", podpaths.Linux, "manager: {runtime: {name: dockershim}}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true, image: {repo: example.com/my-scanner}}}"},
	{"Windows", podpaths.Windows, "components: {collector: {enabled: true}, scanner: {enabled: true}}"},
}

// Every kind of leftover, of both runtimes: a policy that reclaims.
const reclaimAll = "leftovers: {reclaim: [unnamed-image, other-namespace, old-lease, unreferenced, orphan-container, unreferenced-layer, incomplete-layer]}"

// The runs a container's privileges may depend on; an item held in some
// of them only is marked with the runs it is held in.
const (
	runScheduled  = "scheduled runs"
	runThresholds = "disk thresholds set"
	runImageList  = "ImageList runs"
)

var containerLabels = map[string]string{CollectorContainer: "collector", ScannerContainer: "scanner", RemoverContainer: "remover"}

// ownVolumes say, for operators, what each of the pod's own volumes is.
var ownVolumes = map[string]string{
	volShared:                      "the hand-off directory",
	volImageList:                   "the ImageList's images",
	volConfig:                      "the EraserConfig",
	volScanCache:                   "the scan cache at `" + ScannerCacheDir + "`",
	volScanTmp:                     "`" + podpaths.ScannerTmp + "`",
	podpaths.VolumeScanToken:       "a token for the scan service",
	podpaths.VolumeNodeRefs:        "the cluster's image references",
	podpaths.VolumeClusterRefs:     "the cluster's image references",
	podpaths.ExclusionVolumePrefix: "the exclusion lists",
}

// holding is what one container holds in one run, cell by cell.
type holding struct {
	runsAs, socket     string
	written, read, pod []string
}

func buildFor(t *testing.T, os podpaths.OS, doc string, run string) *corev1.Pod {
	t.Helper()
	p := Params{References: testRefs, Job: "j", JobUID: "u", Kind: KindCollector, Node: "n", OS: os, Namespace: "eraser-system",
		ConfigMap: "j", ConfigKey: "c.yaml", LogLevel: "info", Exclusions: []string{"keep"},
		ScanService: "http://10.0.0.1:8890", ScanDB: &scanshare.DB{Repo: "ghcr.io/aquasecurity/trivy-db", Digest: "sha256:" + strings.Repeat("d", 64)}}
	switch run {
	case runThresholds:
		doc = strings.Replace(doc, "manager: {", "manager: {retention: {highThresholdPercent: 85, lowThresholdPercent: 80}, ", 1)
		if !strings.Contains(doc, "retention") {
			doc = "manager: {retention: {highThresholdPercent: 85, lowThresholdPercent: 80}}\n" + doc
		}
	case runImageList:
		p.Kind = KindManual
	}
	p.Config = cfg(t, doc)
	pod, err := Build(p)
	if err != nil {
		t.Fatalf("%s: %v", run, err)
	}
	return pod
}

// holdingOf reads what container c holds in pod.
func holdingOf(t *testing.T, pod *corev1.Pod, c corev1.Container) holding {
	t.Helper()
	var h holding
	if sc := pod.Spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
		h.runsAs = "`" + *sc.WindowsOptions.RunAsUserName + "` on the host (HostProcess)"
		h.written, h.read = []string{"all of the node"}, []string{"all of the node"}
		for _, e := range c.Env {
			if e.Name == "ERASER_RUNTIME_ENDPOINT" {
				h.socket = "the host's `" + e.Value + "`"
			}
		}
	} else {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsUser != nil || sc.Capabilities == nil {
			t.Fatalf("%s: security context %+v", c.Name, sc)
		}
		h.runsAs = "root, no capabilities"
		if len(sc.Capabilities.Add) > 0 {
			var caps []string
			for _, c := range sc.Capabilities.Add {
				caps = append(caps, "`"+string(c)+"`")
			}
			h.runsAs = "root with " + strings.Join(caps, " and ")
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("%s mounts %s, which the pod does not have", c.Name, m.Name)
		}
		switch {
		case v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathSocket:
			h.socket = "`" + v.HostPath.Path + "`"
		case v.HostPath != nil && m.ReadOnly:
			h.read = append(h.read, "`"+v.HostPath.Path+"`")
		case v.HostPath != nil:
			h.written = append(h.written, "`"+v.HostPath.Path+"`")
		default:
			name := m.Name
			if strings.HasPrefix(name, podpaths.ExclusionVolumePrefix) {
				name = podpaths.ExclusionVolumePrefix
			}
			what, ok := ownVolumes[name]
			if !ok {
				t.Fatalf("volume %s has no description here: say what it is for operators", m.Name)
			}
			if e := v.EmptyDir; e != nil {
				var how []string
				if e.Medium == corev1.StorageMediumMemory {
					how = append(how, "in memory")
				}
				if e.SizeLimit != nil {
					how = append(how, "at most "+e.SizeLimit.String())
				} else {
					how = append(how, "unbounded")
				}
				what += " (" + strings.Join(how, ", ") + ")"
			}
			if !slices.Contains(h.pod, what) {
				h.pod = append(h.pod, what)
			}
		}
	}
	if h.socket == "" {
		h.socket = "none"
	}
	return h
}

// merge makes one cell of an item list held in several runs: an item held
// in every run the container runs in stands alone, any other is marked
// with the runs that hold it.
func merge(t *testing.T, lists map[string][]string) []string {
	t.Helper()
	runs := []string{runScheduled, runThresholds, runImageList}
	var in []string
	for _, r := range runs {
		if _, ok := lists[r]; ok {
			in = append(in, r)
		}
	}
	var order []string
	held := map[string][]string{}
	for _, r := range in {
		for _, item := range lists[r] {
			if _, seen := held[item]; !seen {
				order = append(order, item)
			}
			held[item] = append(held[item], r)
		}
	}
	var out []string
	for _, item := range order {
		switch where := held[item]; {
		case slices.Equal(where, in):
			out = append(out, item)
		case slices.Equal(where, []string{runThresholds}), slices.Equal(where, []string{runImageList}):
			out = append(out, marked(item, where[0]))
		case slices.Equal(where, []string{runScheduled, runThresholds}):
			out = append(out, marked(item, runScheduled))
		default:
			t.Fatalf("%s is held in %v of %v: the table has no way to say so", item, where, in)
		}
	}
	return out
}

// marked adds a run to an item's parenthesis, or gives it one.
func marked(item, run string) string {
	if strings.HasSuffix(item, ")") {
		return strings.TrimSuffix(item, ")") + "; " + run + ")"
	}
	return item + " (" + run + ")"
}

func cell(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

// privilegeRows are the table's rows, from the pod specs.
func privilegeRows(t *testing.T) [][]string {
	t.Helper()
	var rows [][]string
	for _, node := range privilegeNodes {
		byPolicy := map[string]map[string][]string{} // policy -> container -> row cells after the policy
		for _, policy := range []string{"off", "on"} {
			doc := node.doc
			if policy == "on" {
				doc = strings.Replace(doc, "manager: {", "manager: {"+reclaimAll+", ", 1)
				if !strings.Contains(doc, "leftovers") {
					doc = "manager: {" + reclaimAll + "}\n" + doc
				}
			}
			type perRun struct {
				runsAs, socket     map[string]bool
				written, read, pod map[string][]string
			}
			seen := map[string]*perRun{}
			var order []string
			for _, run := range []string{runScheduled, runThresholds, runImageList} {
				pod := buildFor(t, node.os, doc, run)
				for _, c := range pod.Spec.Containers {
					h := holdingOf(t, pod, c)
					r := seen[c.Name]
					if r == nil {
						r = &perRun{runsAs: map[string]bool{}, socket: map[string]bool{}, written: map[string][]string{}, read: map[string][]string{}, pod: map[string][]string{}}
						seen[c.Name] = r
						order = append(order, c.Name)
					}
					r.runsAs[h.runsAs], r.socket[h.socket] = true, true
					r.written[run], r.read[run], r.pod[run] = h.written, h.read, h.pod
				}
			}
			byPolicy[policy] = map[string][]string{}
			for _, name := range order {
				r := seen[name]
				if len(r.runsAs) != 1 || len(r.socket) != 1 {
					t.Fatalf("%s on %s: how it runs or its socket differs from run to run: %v %v", name, node.label, r.runsAs, r.socket)
				}
				byPolicy[policy][name] = []string{
					only(r.runsAs), only(r.socket), cell(merge(t, r.written)), cell(merge(t, r.read)), cell(merge(t, r.pod)),
				}
			}
		}
		for _, name := range []string{CollectorContainer, ScannerContainer, RemoverContainer} {
			off, on := byPolicy["off"][name], byPolicy["on"][name]
			if off == nil || on == nil {
				t.Fatalf("no %s on %s", name, node.label)
			}
			if slices.Equal(off, on) {
				rows = append(rows, append([]string{node.label, "off or on", containerLabels[name]}, off...))
				continue
			}
			rows = append(rows, append([]string{node.label, "off", containerLabels[name]}, off...))
			rows = append(rows, append([]string{node.label, "on", containerLabels[name]}, on...))
		}
	}
	return rows
}

func only(set map[string]bool) string {
	for k := range set {
		return k
	}
	return ""
}

var privilegeHeader = []string{"node", "leftovers reclaim", "container", "runs as", "runtime socket", "node paths written", "node paths read", "the pod's own volumes"}

func renderTable(rows [][]string) string {
	var b strings.Builder
	line := func(cells []string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	line(privilegeHeader)
	sep := make([]string, len(privilegeHeader))
	for i := range sep {
		sep[i] = "---"
	}
	b.WriteString("|" + strings.Join(sep, "|") + "|\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// documentedRows are the rows of the first table in the doc's section, the
// header and separator left out.
func documentedRows(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "\n"+privilegesSection+"\n")
	if start < 0 {
		t.Errorf("docs/security.md has no %q section", privilegesSection)
		return nil
	}
	var rows [][]string
	inTable := false
	for _, l := range strings.Split(doc[start+1:], "\n")[1:] {
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Errorf("no table in the %q section of docs/security.md", privilegesSection)
		return nil
	}
	if diff := cmp.Diff(privilegeHeader, rows[0]); diff != "" {
		t.Errorf("the table's header (-want +docs):\n%s", diff)
	}
	return rows[2:]
}

// TestSecurityDocPrivileges: docs/security.md says what each worker
// container holds exactly as the pod specs grant it, on every runtime, with
// leftovers reclaimed or not.
func TestSecurityDocPrivileges(t *testing.T) {
	want := privilegeRows(t)
	if diff := cmp.Diff(want, documentedRows(t)); diff != "" {
		t.Errorf("docs/security.md, %q (-pod specs +docs):\n%s\nThe table as the pod specs grant it:\n\n%s", privilegesSection, diff, renderTable(want))
	}
}
