package scanconfig

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/eraser-oss/eraser/internal/util/jsonfields"
	"github.com/eraser-oss/eraser/internal/util/suggest"
)

// Upstream's Trivy scanner decoded its configuration leniently: a key it did
// not know was dropped. Refusing one here would fail the scan on every node
// for a document that worked upstream, so unknown keys are warnings, with
// the key that was probably meant. The exception is a near miss of one of
// this project's own keys: no upstream document has those, so such a key is
// a typo made from this project's docs, and it is refused.

// ownKeys are the keys this project added to upstream's schema.
var ownKeys = []string{"skipDBUpdate", "dbDownloadTimeout"}

// upstreamRuntimeKey is upstream's scanner configuration's runtime, which
// its scanner replaced at start with the manager's manager.runtime.
const upstreamRuntimeKey = "runtime"

var durationType = reflect.TypeFor[duration]()

// sections are the keys that hold a section of their own; a top-level key
// named like one of a section's keys belongs there.
func sections() map[string]map[string]reflect.Type {
	out := map[string]map[string]reflect.Type{}
	for k, t := range jsonfields.Of(reflect.TypeFor[Config]()) {
		if t.Kind() == reflect.Struct && t != durationType {
			out[k] = jsonfields.Of(t)
		}
	}
	return out
}

// checkKeys returns a warning for each key of doc (the decoded YAML) that
// the configuration does not have, and an error for a key that looks like
// a misspelling of one of ownKeys.
func checkKeys(doc map[string]any) ([]string, error) {
	top := jsonfields.Of(reflect.TypeFor[Config]())
	secs := sections()
	var warnings []string
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		name, known := lookup(top, k)
		switch {
		case known:
			if sec, ok := secs[name]; ok {
				inner, _ := doc[k].(map[string]any)
				for _, ik := range slices.Sorted(maps.Keys(inner)) {
					if _, ok := lookup(sec, ik); !ok {
						warnings = append(warnings, unknownWarning(name+"."+ik, ik, sec))
					}
				}
			}
		case k == upstreamRuntimeKey:
			warnings = append(warnings, k+": ignored, as by upstream Eraser's scanner, which replaced it with manager.runtime; the scanner reads the runtime the worker pod mounts")
		case inSection(secs, k) != "":
			warnings = append(warnings, fmt.Sprintf("%s: ignored, as by upstream Eraser: it belongs under %s (%s.%s)", k, inSection(secs, k), inSection(secs, k), k))
		default:
			if s := suggest.Closest(k, slices.Sorted(maps.Keys(top))); slices.Contains(ownKeys, s) {
				return nil, fmt.Errorf("%s: unknown key, did you mean %q?", k, s)
			}
			warnings = append(warnings, unknownWarning(k, k, top))
		}
	}
	return warnings, nil
}

// lookup finds key as encoding/json does, which upstream's decoding used:
// exactly, or else ignoring case.
func lookup(keys map[string]reflect.Type, key string) (string, bool) {
	if _, ok := keys[key]; ok {
		return key, true
	}
	for k := range keys {
		if strings.EqualFold(k, key) {
			return k, true
		}
	}
	return "", false
}

// inSection names the section that has key, or "".
func inSection(secs map[string]map[string]reflect.Type, key string) string {
	for _, name := range slices.Sorted(maps.Keys(secs)) {
		if _, ok := secs[name][key]; ok {
			return name
		}
	}
	return ""
}

func unknownWarning(p, key string, keys map[string]reflect.Type) string {
	w := p + ": unknown key, ignored as by upstream Eraser"
	if s := suggest.Closest(key, slices.Sorted(maps.Keys(keys))); s != "" {
		w += fmt.Sprintf("; did you mean %q?", s)
	}
	return w
}
