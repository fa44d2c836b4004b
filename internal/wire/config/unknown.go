package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eraser-oss/eraser/internal/util/jsonfields"
	"github.com/eraser-oss/eraser/internal/util/suggest"
)

// ignoredKeys are the keys upstream Eraser accepted without effect. They are
// the only keys outside the schema that a document may carry: refusing them
// would break configurations that work with upstream, and ignoring them
// changes nothing about what is removed or where. The documents declare them
// as raw fields, so that they are known keys; this table says why each is
// ignored.
var ignoredKeys = []struct {
	path []string
	why  string
}{
	{[]string{"health"}, helmIgnored},
	{[]string{"metrics"}, helmIgnored},
	{[]string{"webhook"}, helmIgnored},
	{[]string{"leaderElection"}, helmIgnored},
	{[]string{"manager", "extraScannerVolumes"}, docsIgnored},
	{[]string{"manager", "extraScannerVolumeMounts"}, docsIgnored},
}

const (
	helmIgnored = "ignored, as by upstream Eraser; the manager's flags configure it"
	docsIgnored = "ignored, as by upstream Eraser, whose docs listed it but never read it; components.scanner.volumes mounts host paths into the scanner"
)

// ignoredKeyWarnings warns about each ignored key the document sets, even to
// null: the user wrote it expecting an effect.
func ignoredKeyWarnings(top map[string]any) []string {
	var out []string
	for _, k := range ignoredKeys {
		obj := top
		for _, parent := range k.path[:len(k.path)-1] {
			obj, _ = obj[parent].(map[string]any)
		}
		if _, set := obj[k.path[len(k.path)-1]]; set {
			out = append(out, strings.Join(k.path, ".")+": "+k.why)
		}
	}
	return out
}

// versionHints explain keys that exist in another EraserConfig version than
// the document's: the likely mistake is the apiVersion, not the key.
var versionHints = map[string]string{
	"components.remover":          "eraser.sh/v1alpha1 calls the remover components.eraser; components.remover needs eraser.sh/v1alpha2 or later",
	"components.eraser":           "since eraser.sh/v1alpha2 the remover is components.remover",
	"manager.additionalPodLabels": "additionalPodLabels needs apiVersion eraser.sh/v1alpha3",
}

// maxListedKeys bounds the known keys an error lists: a Kubernetes volume
// has dozens, and a suggestion says more then.
const maxListedKeys = 12

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// unknownKeys reports the keys of v that t has no field for. Upstream drops
// them silently, and a typo such as nodeFilter.selector then keeps a default
// that runs the job on more nodes than meant; so each is an error.
func unknownKeys(t reflect.Type, v any, path *field.Path) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	var out field.ErrorList
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonfields.Of(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			child := childPath(path, k)
			ft, known := fields[k]
			if !known {
				out = append(out, unknownKey(child, k, fields))
				continue
			}
			out = append(out, unknownKeys(ft, obj[k], child)...)
		}
	case reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				out = append(out, unknownKeys(t.Elem(), obj[k], path.Key(k))...)
			}
		}
	case reflect.Slice:
		if list, ok := v.([]any); ok {
			for i, e := range list {
				out = append(out, unknownKeys(t.Elem(), e, path.Index(i))...)
			}
		}
	}
	return out
}

// unknownKey says what could have been meant: a key of another version, a
// key of this section spelt nearly the same, and the section's keys.
func unknownKey(p *field.Path, key string, fields map[string]reflect.Type) *field.Error {
	known := make([]string, 0, len(fields))
	for k := range fields {
		// Keys kept only to be ignored are no one's intent.
		if fields[k] != rawMessageType {
			known = append(known, k)
		}
	}
	slices.Sort(known)
	detail := "unknown key"
	switch s := suggest.Closest(key, known); {
	case versionHints[p.String()] != "":
		detail += "; " + versionHints[p.String()]
	case s != "":
		detail += fmt.Sprintf(", did you mean %q?", s)
	case len(known) <= maxListedKeys:
		detail += "; the keys here are " + strings.Join(known, ", ")
	}
	return &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: field.OmitValueType{}, Detail: detail}
}
