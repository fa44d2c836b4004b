package render

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// documentedRBAC is the "ours" column of docs/install.md's RBAC table:
// "<kind>/<resource>" -> its verbs, sorted and comma-separated. A resource
// marked (Role) is the Role's, any other the ClusterRole's; "–" grants
// nothing and is left out.
func documentedRBAC(t *testing.T) map[string]string {
	t.Helper()
	section := docSection(t, "install.md", "## RBAC")
	row := regexp.MustCompile("(?m)^\\| `([a-z/]+)`( \\((?:cluster|Role)\\))? \\| [^|]* \\| ([^|]*) \\|")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		kind := "ClusterRole"
		if m[2] == " (Role)" {
			kind = "Role"
		}
		ours := strings.TrimSpace(m[3])
		if ours == "–" {
			continue
		}
		verbs := strings.Split(ours, ", ")
		slices.Sort(verbs)
		out[kind+"/"+m[1]] = strings.Join(verbs, ", ")
	}
	if len(out) == 0 {
		t.Fatal("no rows parsed from the RBAC table of docs/install.md")
	}
	return out
}

// The RBAC table of docs/install.md says exactly what the shipped role
// grants: every resource with its verbs, in the ClusterRole or the Role.
func TestRBACTableMatchesRole(t *testing.T) {
	shipped := map[string]string{}
	for kind, rules := range generatedRules(t) {
		verbs := map[string][]string{}
		for _, r := range rules {
			for _, res := range r.Resources {
				verbs[res] = append(verbs[res], r.Verbs...)
			}
		}
		for res, v := range verbs {
			slices.Sort(v)
			shipped[kind+"/"+res] = strings.Join(slices.Compact(v), ", ")
		}
	}
	if diff := cmp.Diff(shipped, documentedRBAC(t)); diff != "" {
		t.Errorf("docs/install.md's RBAC table, ours column (-config/rbac/role.yaml +docs):\n%s", diff)
	}
}

// docSection is the section of docs/<page> under heading (a whole
// Markdown heading line such as "## RBAC"), up to the next heading of the
// same level.
func docSection(t *testing.T, page, heading string) string {
	t.Helper()
	data, err := os.ReadFile(repoPath("docs", page))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("docs/%s has no %s section", page, heading)
	}
	section := doc[start+1:]
	level := heading[:strings.IndexByte(heading, ' ')+1]
	if end := strings.Index(section[1:], "\n"+level); end >= 0 {
		section = section[:end+1]
	}
	return section
}
