package render

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// renderNotes is the text helm install prints after installing the chart
// with the values set, as the Helm SDK renders it. With cluster, the
// install is a server-side dry run against the test's API server, so that
// the chart's lookups see what is there (the CRDs, which envtest installed
// without Helm's ownership: the release reuses them, and the NOTES say so).
func renderNotes(t *testing.T, namespace string, set []string, cluster bool) string {
	t.Helper()
	return renderNotesWith(t, namespace, nil, set, cluster)
}

// renderNotesWith is renderNotes with values files too, applied before set.
func renderNotesWith(t *testing.T, namespace string, files, set []string, cluster bool) string {
	t.Helper()
	chrt, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	vals, err := (&values.Options{ValueFiles: files, Values: set}).MergeValues(getter.Providers{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	if cluster {
		t.Setenv("KUBECONFIG", env.KubeconfigPath)
		if err := cfg.Init(cli.New().RESTClientGetter(), namespace, "memory"); err != nil {
			t.Fatalf("helm client for the test cluster: %v", err)
		}
		install.DryRunStrategy = action.DryRunServer
		// Other tests leave the chart's cluster-wide objects behind
		// without Helm's ownership.
		install.TakeOwnership = true
	}
	install.ReleaseName = DefaultRelease
	install.Namespace = namespace
	install.Replace = true
	if install.KubeVersion, err = common.ParseKubeVersion(kubeVersion); err != nil {
		t.Fatal(err)
	}
	rel, err := install.Run(chrt, vals)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		t.Fatalf("unexpected release type %T", rel)
	}
	return r.Info.Notes
}

// shellBlocks are the paragraphs of notes that start with a command, as a
// user selects and pastes them: every line from the command to the next
// blank line.
func shellBlocks(notes string) []string {
	var out []string
	for _, p := range strings.Split(notes, "\n\n") {
		p = strings.Trim(p, "\n")
		if strings.HasPrefix(p, "kubectl ") || strings.HasPrefix(p, "helm ") {
			out = append(out, p)
		}
	}
	return out
}

// The commands in the chart's NOTES run as they are printed when pasted
// into bash: each parses, a heredoc ends where the notes say, and the real
// kubectl accepts them against a real API server (server-side dry run, so
// nothing stays). Indented heredoc terminators, for one, never end.
func TestChartNotesPaste(t *testing.T) {
	testenv.Require(t)
	kubectl := testenv.Kubectl(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skipf("no bash: %v", err)
	}
	// kubectl as the user's, pointed at the test's API server; the dry run
	// is the shim's only addition to what the user typed. helm (the
	// release's upgrade, which needs a release) only prints what it got.
	shim := t.TempDir()
	scripts := map[string]string{
		"kubectl": fmt.Sprintf("#!/bin/sh\nexec %q --kubeconfig %q \"$@\" --dry-run=server\n", kubectl, env.KubeconfigPath),
		"helm":    "#!/bin/sh\necho helm \"$@\"\n",
	}
	for name, script := range scripts {
		if err := os.WriteFile(filepath.Join(shim, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	const ns = "notes-paste"
	namespace(t, ns, nil)
	always := []string{
		"namespace/" + ns + " labeled (server dry run)",
		"imagelist.eraser.sh/cleanup created (server dry run)",
	}
	// The user names the chart they installed, as the NOTES ask.
	const chart = "oci://registry.example.com/eraser/charts/eraser --version 1.2.3"
	adopt := "helm upgrade " + DefaultRelease + " " + chart + " -n " + ns + " --reuse-values --set crds.adopt=true --take-ownership --force-conflicts"
	cases := map[string]struct {
		set     []string
		cluster bool
		want    []string
	}{
		"defaults":                           {want: always},
		"collector enabled":                  {set: []string{"runtimeConfig.components.collector.enabled=true"}, want: always},
		"over CRDs the release does not own": {cluster: true, want: append(slices.Clone(always), adopt)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := tc.want
			notes := renderNotes(t, ns, tc.set, tc.cluster)
			blocks := shellBlocks(notes)
			if len(blocks) != len(want) {
				t.Fatalf("NOTES hold %d commands, want %d:\n%s", len(blocks), len(want), notes)
			}
			var got []string
			for _, block := range blocks {
				if out, err := exec.Command(bash, "-n", "-c", block).CombinedOutput(); err != nil || len(out) > 0 {
					t.Errorf("bash -n: %v %s\n%s", err, out, block)
					continue
				}
				cmd := exec.Command(bash, "-c", block+"\n")
				cmd.Env = append(os.Environ(), "PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH"), "CHART="+chart)
				cmd.Stdin = nil
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil || stderr.Len() > 0 {
					t.Errorf("pasted into bash: %v\nstderr: %s\n%s", err, stderr.String(), block)
				}
				got = append(got, strings.TrimSpace(stdout.String()))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("what kubectl did (-want +got):\n%s", diff)
			}
		})
	}
}
