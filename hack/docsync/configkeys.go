package docsync

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// SchemaLeaves are the dotted paths of a JSON Schema's leaf keys: an object
// with properties is descended, and so are the object alternatives of an
// anyOf or oneOf (manager.runtime, a string or an object); anything else,
// arrays and open maps included, is a leaf.
func SchemaLeaves(schema map[string]any) []string {
	var out []string
	schemaLeaves(schema, "", &out)
	slices.Sort(out)
	return out
}

func schemaLeaves(s map[string]any, path string, out *[]string) {
	if props, ok := s["properties"].(map[string]any); ok && len(props) > 0 {
		for k, v := range props {
			if sub, ok := v.(map[string]any); ok {
				schemaLeaves(sub, join(path, k), out)
			}
		}
		return
	}
	before := len(*out)
	for _, key := range []string{"anyOf", "oneOf"} {
		alts, _ := s[key].([]any)
		for _, a := range alts {
			if sub, ok := a.(map[string]any); ok && sub["properties"] != nil {
				schemaLeaves(sub, path, out)
			}
		}
	}
	if len(*out) == before && path != "" {
		*out = append(*out, path)
	}
}

// DocumentLeaves are the dotted paths of a decoded YAML or JSON document's
// leaves: a map with keys is descended; a scalar, a list, an empty map or
// null is a leaf.
func DocumentLeaves(doc map[string]any) []string {
	var out []string
	documentLeaves(doc, "", &out)
	slices.Sort(out)
	return out
}

func documentLeaves(v any, path string, out *[]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, sub := range m {
			documentLeaves(sub, join(path, k), out)
		}
		return
	}
	if path != "" {
		*out = append(*out, path)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// component is a component's name in an EraserConfig's key path; every
// component takes the same keys, so the tables name them once.
var component = regexp.MustCompile(`^components\.(collector|scanner|remover|eraser)\.`)

// ComponentKey writes components.<name>.key as components.<c>.key.
func ComponentKey(key string) string {
	return component.ReplaceAllString(key, "components.<c>.")
}

// Added are the keys of the schema that upstream's documents do not have,
// component keys written once (ComponentKey), sorted.
func Added(schema, upstream []string) []string {
	up := map[string]bool{}
	for _, k := range upstream {
		up[ComponentKey(k)] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range schema {
		k = ComponentKey(k)
		if !up[k] && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Row is one row of a reference table: the keys its first cell names, in
// full (the section's prefix added), and its other cells.
type Row struct {
	Keys    []string
	Default string
	Notes   string
	// Anchor is the heading the row is under, as a link names it.
	Anchor string
}

var (
	tableRow   = regexp.MustCompile(`^\|(.*)\|\s*$`)
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	keyLike    = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)*$`)
	headingRow = regexp.MustCompile(`^(#{2,3})\s+(.*?)\s*$`)
)

// ReferenceRows reads the configuration reference's tables: the rows under
// "## manager" name keys under manager., those under "## components" keys
// of every component. prefixes maps a level-2 heading to the prefix of the
// keys its tables name; other sections are not read.
func ReferenceRows(page string, prefixes map[string]string) []Row {
	var rows []Row
	prefix, anchor, inSection := "", "", false
	for _, line := range strings.Split(page, "\n") {
		if m := headingRow.FindStringSubmatch(line); m != nil {
			if m[1] == "##" {
				prefix, inSection = prefixes[m[2]]
			}
			anchor = Anchor(m[2])
			continue
		}
		m := tableRow.FindStringSubmatch(line)
		if !inSection || m == nil {
			continue
		}
		cells := strings.Split(m[1], " | ")
		if len(cells) < 2 {
			continue
		}
		var keys []string
		for _, c := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			if !keyLike.MatchString(c[1]) {
				continue
			}
			k := c[1]
			if !strings.HasPrefix(k, strings.TrimSuffix(prefix, ".")+".") {
				k = prefix + k
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			continue
		}
		row := Row{Keys: keys, Notes: strings.TrimSpace(cells[len(cells)-1]), Anchor: anchor}
		if len(cells) > 2 {
			row.Default = strings.TrimSpace(cells[1])
			row.Notes = strings.TrimSpace(strings.Join(cells[2:], " | "))
		}
		rows = append(rows, row)
	}
	return rows
}

// Covers says whether the documented key doc covers the schema's key: the
// same, or a key under it (windows.image covers windows.image.repo).
func Covers(doc, key string) bool {
	return doc == key || strings.HasPrefix(key, doc+".")
}

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	marked = regexp.MustCompile(`^(\*\*)?(ours|not in upstream)(\*\*)?[:;.]?\s*`)
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Gist is the first sentence of a reference row's notes, without the mark
// that says upstream lacks the key, its relative links made relative to
// the table's page (page is the reference's path from there).
func Gist(notes, page string) string {
	s := marked.ReplaceAllString(strings.TrimSpace(notes), "")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	dir := path.Dir(page)
	return mdLink.ReplaceAllStringFunc(s, func(m string) string {
		target := m[2 : len(m)-1]
		switch {
		case scheme.MatchString(target):
			return m
		case strings.HasPrefix(target, "#"):
			target = page + target
		default:
			target = path.Join(dir, target)
		}
		return "](" + target + ")"
	})
}

// AddedTable is the markdown table of the added keys, one row per reference
// row that documents one of them, in the reference's order, each key linked
// to its section of the reference (link is the reference page's path from
// the table's page). missing are added keys no row documents.
func AddedTable(added []string, rows []Row, link string) (table string, missing []string) {
	var b strings.Builder
	b.WriteString("| key | default | what |\n|---|---|---|\n")
	covered := map[string]bool{}
	for _, r := range rows {
		var names []string
		for _, d := range r.Keys {
			for _, k := range added {
				if Covers(d, k) {
					covered[k] = true
					if !slices.Contains(names, d) {
						names = append(names, d)
					}
				}
			}
		}
		if len(names) == 0 {
			continue
		}
		cells := make([]string, len(names))
		for i, n := range names {
			cells[i] = fmt.Sprintf("[`%s`](%s#%s)", n, link, r.Anchor)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.Join(cells, ", "), r.Default, Gist(r.Notes, link))
	}
	for _, k := range added {
		if !covered[k] {
			missing = append(missing, k)
		}
	}
	return b.String(), missing
}

// Anchor is GitHub's id of a heading: lower case, punctuation dropped but
// for hyphens and underscores, spaces as hyphens.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
