// Package jsonfields lists the keys encoding/json reads into a struct, so
// that a configuration parser can tell which keys of a document the type
// has no field for.
package jsonfields

import (
	"reflect"
	"strings"
)

// Of maps the JSON keys of struct type t to their fields' types, as
// encoding/json reads them: a tag's name, else the field's name; "-" and
// unexported fields skipped; embedded structs, and untagged fields marked
// inline, flattened into t's keys.
func Of(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		inline := (f.Anonymous && name == "") || (name == "" && strings.Contains(opts, "inline"))
		if inline {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range Of(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
