package render

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// upstreamRBAC is what upstream Eraser's manager role grants (v1.4):
// "<kind>/<resource>" -> its verbs.
var upstreamRBAC = map[string][]string{
	"ClusterRole/nodes":             {"get", "list", "watch"},
	"ClusterRole/imagejobs":         {"create", "delete", "get", "list", "watch"},
	"ClusterRole/imagejobs/status":  {"get", "patch", "update"},
	"ClusterRole/imagelists":        {"get", "list", "watch"},
	"ClusterRole/imagelists/status": {"get", "patch", "update"},
	"Role/configmaps":               {"create", "delete", "get", "list", "patch", "update", "watch"},
	"Role/pods":                     {"create", "delete", "get", "list", "update", "watch"},
	"Role/podtemplates":             {"create", "delete", "get", "list", "patch", "update", "watch"},
}

// documentedGains is the table of docs/migrating.md's "Permissions the
// manager gains": "<kind>/<resource>" -> its added verbs, sorted and
// comma-separated.
func documentedGains(t *testing.T) map[string]string {
	t.Helper()
	section := docSection(t, "migrating.md", "### Permissions the manager gains")
	row := regexp.MustCompile("(?m)^\\| `([a-z/]+)` \\| (cluster|namespace) \\| ([^|]*) \\|")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		kind := "ClusterRole"
		if m[2] == "namespace" {
			kind = "Role"
		}
		verbs := strings.Split(strings.TrimSpace(m[3]), ", ")
		slices.Sort(verbs)
		out[kind+"/"+m[1]] = strings.Join(verbs, ", ")
	}
	if len(out) == 0 {
		t.Fatal("no rows parsed from docs/migrating.md's table of permissions gained")
	}
	return out
}

// docs/migrating.md lists every permission the shipped role grants that
// upstream's did not, and no other.
func TestPrivilegesGainedMatchRole(t *testing.T) {
	gained := map[string]string{}
	for kind, rules := range generatedRules(t) {
		verbs := map[string][]string{}
		for _, r := range rules {
			for _, res := range r.Resources {
				verbs[res] = append(verbs[res], r.Verbs...)
			}
		}
		for res, v := range verbs {
			var added []string
			for _, verb := range v {
				if !slices.Contains(upstreamRBAC[kind+"/"+res], verb) {
					added = append(added, verb)
				}
			}
			if len(added) > 0 {
				slices.Sort(added)
				gained[kind+"/"+res] = strings.Join(slices.Compact(added), ", ")
			}
		}
	}
	if diff := cmp.Diff(gained, documentedGains(t)); diff != "" {
		t.Errorf("docs/migrating.md's permissions gained over upstream (-config/rbac/role.yaml +docs):\n%s", diff)
	}
}
