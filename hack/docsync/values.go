package docsync

import (
	"encoding/json"
	"fmt"
	"strings"
)

// NotInUpstream is how a table says that upstream lacks a key.
const NotInUpstream = "not in upstream"

// ValuesRow is one row of the chart's values table: the keys its first
// cell names, written in full, and its last cell.
type ValuesRow struct {
	Keys []string
	What string
}

// ValuesRows reads a values table: a key cell may shorten the keys after
// its first to ".name", under the first one's parent
// (`deploy.image.repo`, `.tag`).
func ValuesRows(table string) []ValuesRow {
	var rows []ValuesRow
	for _, line := range strings.Split(table, "\n") {
		m := tableRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cells := strings.Split(m[1], " | ")
		if len(cells) < 2 {
			continue
		}
		var keys []string
		parent := ""
		for _, c := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			k := c[1]
			if strings.HasPrefix(k, ".") && parent != "" {
				k = parent + k
			}
			if !keyLike.MatchString(k) {
				continue
			}
			if parent == "" {
				parent = k
				if i := strings.LastIndex(k, "."); i >= 0 {
					parent = k[:i]
				}
			}
			keys = append(keys, k)
		}
		if len(keys) > 0 {
			rows = append(rows, ValuesRow{Keys: keys, What: strings.TrimSpace(cells[len(cells)-1])})
		}
	}
	return rows
}

// IsUpstream says whether upstream's values have the key, or a key under
// it or above it (upstream's deploy.resources.requests is deploy.resources
// here, an open map).
func IsUpstream(key string, upstream []string) bool {
	for _, u := range upstream {
		if Covers(key, u) || Covers(u, key) {
			return true
		}
	}
	return false
}

// ValuesProblems are what a values table gets wrong: a key of the schema it
// does not name, a row of keys upstream lacks that does not say so, a row
// of upstream's keys that says it is not.
func ValuesProblems(rows []ValuesRow, keys, upstream []string) []string {
	var problems []string
	for _, k := range keys {
		found := false
		for _, r := range rows {
			for _, d := range r.Keys {
				found = found || Covers(d, k)
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("no row names %s", k))
		}
	}
	for _, r := range rows {
		ours := true
		for _, k := range r.Keys {
			ours = ours && !IsUpstream(k, upstream)
		}
		says := strings.HasPrefix(r.What, NotInUpstream)
		switch {
		case ours && !says:
			problems = append(problems, fmt.Sprintf("the row of %s does not start with %q", strings.Join(r.Keys, ", "), NotInUpstream))
		case !ours && says:
			problems = append(problems, fmt.Sprintf("the row of %s says %q, but upstream has it", strings.Join(r.Keys, ", "), NotInUpstream))
		}
	}
	return problems
}

// ValueAt is the value at a dotted path of a decoded document, as JSON, or
// "unset".
func ValueAt(doc map[string]any, key string) string {
	var v any = doc
	for _, part := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return "unset"
		}
		if v, ok = m[part]; !ok {
			return "unset"
		}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return "unset"
	}
	return "`" + string(data) + "`"
}

// MissingRows are the rows a values table lacks, from the schema's
// descriptions and the chart's defaults: one per key no row names.
func MissingRows(rows []ValuesRow, keys, upstream []string, descriptions map[string]string, defaults map[string]any) string {
	var b strings.Builder
	for _, k := range keys {
		found := false
		for _, r := range rows {
			for _, d := range r.Keys {
				found = found || Covers(d, k)
			}
		}
		if found {
			continue
		}
		what := strings.TrimSpace(descriptions[k])
		if !IsUpstream(k, upstream) {
			what = NotInUpstream + "; " + what
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k, ValueAt(defaults, k), what)
	}
	return b.String()
}

// SchemaDescriptions are the descriptions of a JSON Schema's keys, by
// dotted path.
func SchemaDescriptions(schema map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(s map[string]any, path string)
	walk = func(s map[string]any, path string) {
		if d, ok := s["description"].(string); ok && path != "" {
			out[path] = d
		}
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			if sub, ok := v.(map[string]any); ok {
				walk(sub, join(path, k))
			}
		}
	}
	walk(schema, "")
	return out
}
