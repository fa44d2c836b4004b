package docsync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSchemaLeaves(t *testing.T) {
	schema := map[string]any{"properties": map[string]any{
		"manager": map[string]any{"properties": map[string]any{
			"runtime": map[string]any{"anyOf": []any{
				map[string]any{"type": "string"},
				map[string]any{"properties": map[string]any{"name": map[string]any{}, "windowsAddress": map[string]any{}}},
			}},
			"pullSecrets": map[string]any{"type": "array"},
		}},
	}}
	want := []string{"manager.pullSecrets", "manager.runtime.name", "manager.runtime.windowsAddress"}
	if diff := cmp.Diff(want, SchemaLeaves(schema)); diff != "" {
		t.Errorf("SchemaLeaves (-want +got):\n%s", diff)
	}
}

func TestAddedTable(t *testing.T) {
	page := "# Reference\n\n## manager\n\n| key | default | notes |\n|---|---|---|\n" +
		"| `logLevel` | `info` | upstream's. |\n" +
		"| `imageJob.maxFailedNodes` | unset | ours: the run's failure budget ([more](#a-failure-budget)). Rounded down. |\n" +
		"\n## components\n\n| key | default | notes |\n|---|---|---|\n" +
		"| `windows.image`, `windows.command` | the image | ours; see [Windows](windows.md). |\n"
	rows := ReferenceRows(page, map[string]string{"manager": "manager.", "components": "components.<c>."})
	added := Added(
		[]string{"manager.logLevel", "manager.imageJob.maxFailedNodes", "manager.imageJob.nodeSelector", "components.scanner.windows.image.repo", "components.remover.windows.command"},
		[]string{"manager.logLevel"})
	table, missing := AddedTable(added, rows, "docs/reference.md")
	want := "| key | default | what |\n|---|---|---|\n" +
		"| [`manager.imageJob.maxFailedNodes`](docs/reference.md#manager) | unset | the run's failure budget ([more](docs/reference.md#a-failure-budget)) |\n" +
		"| [`components.<c>.windows.image`](docs/reference.md#components), [`components.<c>.windows.command`](docs/reference.md#components) | the image | see [Windows](docs/windows.md) |\n"
	if diff := cmp.Diff(want, table); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"manager.imageJob.nodeSelector"}, missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
}

func TestValuesProblems(t *testing.T) {
	table := "| key | default | what |\n|---|---|---|\n" +
		"| `deploy.image.repo`, `.tag` | x | the manager image |\n" +
		"| `deploy.replicas` | `1` | a standby |\n" +
		"| `deploy.resources` | y | not in upstream; sizes |\n"
	rows := ValuesRows(table)
	tests := map[string]struct {
		keys []string
		want []string
	}{
		"every key named": {keys: []string{"deploy.image.repo", "deploy.image.tag", "deploy.replicas", "deploy.resources"},
			want: []string{
				`the row of deploy.replicas does not start with "not in upstream"`,
				`the row of deploy.resources says "not in upstream", but upstream has it`,
			}},
		"a key no row names": {keys: []string{"openshift.enabled"},
			want: []string{
				"no row names openshift.enabled",
				`the row of deploy.replicas does not start with "not in upstream"`,
				`the row of deploy.resources says "not in upstream", but upstream has it`,
			}},
	}
	upstream := []string{"deploy.image.repo", "deploy.image.tag", "deploy.resources.limits"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ValuesProblems(rows, tc.keys, upstream)); diff != "" {
				t.Errorf("ValuesProblems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGist(t *testing.T) {
	for name, c := range map[string]struct{ notes, want string }{
		"marked, lower case":     {"**not in upstream**: the size. More.", "the size"},
		"marked, a sentence":     {"**not in upstream**. Never download: use the DB. Missing DB fails.", "Never download: use the DB"},
		"a link from the table":  {"see [below](#x). More.", "see [below](docs/ref.md#x)"},
		"a page link from there": {"see [Windows](windows.md)", "see [Windows](docs/windows.md)"},
	} {
		if got := Gist(c.notes, "docs/ref.md"); got != c.want {
			t.Errorf("%s: Gist(%q) = %q, want %q", name, c.notes, got, c.want)
		}
	}
}
