// Package crdcheck finds the fields of the eraser.sh API that an installed
// CRD would not keep. The API server prunes every field a structural schema
// does not declare, without an error: a CRD from another release (upstream
// Eraser's, say) accepts the manager's writes and drops their new fields,
// and a user's spec.dryRun with them.
package crdcheck

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
)

// Path segments standing for every item of a list and every value of a map.
const (
	items  = "[]"
	values = "{}"
)

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// Fields lists the field paths of a kind's Go type as encoding/json writes
// them, each a list of segments: a field's JSON name, items for the items
// of a list, values for the values of a map. apiVersion, kind and metadata
// are left out: every CRD keeps them. A type that marshals itself (a
// timestamp) is one field.
func Fields(t reflect.Type) [][]string {
	var out [][]string
	structFields(t, nil, &out, map[reflect.Type]bool{})
	var kept [][]string
	for _, p := range out {
		switch p[0] {
		case "apiVersion", "kind", "metadata":
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// field adds the paths of a value of type t at path; visiting guards
// against a type that contains itself.
func field(t reflect.Type, path []string, out *[][]string, visiting map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if marshalsItself(t) {
		*out = append(*out, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if visiting[t] {
			*out = append(*out, path)
			return
		}
		n := len(*out)
		structFields(t, path, out, visiting)
		if len(*out) == n {
			*out = append(*out, path) // a struct with no fields of its own
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			*out = append(*out, path) // []byte is a base64 string
			return
		}
		field(t.Elem(), appendPath(path, items), out, visiting)
	case reflect.Map:
		field(t.Elem(), appendPath(path, values), out, visiting)
	default:
		*out = append(*out, path)
	}
}

func structFields(t reflect.Type, path []string, out *[][]string, visiting map[reflect.Type]bool) {
	visiting[t] = true
	defer delete(visiting, t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			// Embedded without a name: encoding/json promotes its fields.
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !marshalsItself(ft) {
				structFields(ft, path, out, visiting)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		field(f.Type, appendPath(path, name), out, visiting)
	}
}

func marshalsItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || p.Implements(jsonMarshaler) || t.Implements(textMarshaler) || p.Implements(textMarshaler)
}

func appendPath(path []string, seg string) []string {
	return append(path[:len(path):len(path)], seg)
}

// String renders a path as the docs write one: status.failedNodes[*].node,
// status.failedIndexes.* for a map's values.
func String(path []string) string {
	var b strings.Builder
	for i, seg := range path {
		switch {
		case seg == items:
			b.WriteString("[*]")
		case seg == values:
			b.WriteString(".*")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg)
		}
	}
	return b.String()
}
