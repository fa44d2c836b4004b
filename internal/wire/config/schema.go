package config

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Schema is the JSON Schema (draft-07) of an EraserConfig document of any
// version, generated from the documents' own types: the union of every
// version's keys, each object closed. The chart carries it as the schema of
// runtimeConfig (make manifests writes it into values.schema.json), so that
// `helm install`, `helm upgrade`, `helm template` and `helm lint` refuse a
// typo or a value of the wrong type with its path before the manager sees
// the document. What only the manager judges stays its own: a key of
// another version than the document's, a duration's syntax, the ranges;
// `kubectl eraser config check` runs that.
func Schema() map[string]any {
	var out map[string]any
	for _, doc := range []any{documentV1alpha1{}, documentV1alpha2{}, documentV1alpha3{}} {
		s := schemaOf(reflect.TypeOf(doc))
		if out == nil {
			out = s
			continue
		}
		out = mergeSchemas(out, s)
	}
	props := out["properties"].(map[string]any)
	props["apiVersion"] = map[string]any{"type": "string", "enum": []any{VersionV1alpha1, VersionV1alpha2, VersionV1alpha3},
		"description": "Written by the chart when unset, from the document's shape."}
	props["kind"] = map[string]any{"type": "string", "enum": []any{Kind}}
	return out
}

var (
	scalarType     = reflect.TypeFor[scalar]()
	tolerationType = reflect.TypeFor[corev1.Toleration]()
	volumeType     = reflect.TypeFor[corev1.Volume]()
)

// schemaOf is t's schema. Every value may be null, as the decoder takes it
// (the key keeps its default).
func schemaOf(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
		// Upstream's keys without effect: anything, with a warning.
		return map[string]any{}
	case t == scalarType:
		// A duration or quantity as written: "24h", 10, "5%".
		return typed("string", "number")
	case t == tolerationType || t == volumeType:
		// Kubernetes' own types, which the API server checks in the pods.
		return typed("object")
	}
	switch t.Kind() {
	case reflect.String:
		return typed("string")
	case reflect.Bool:
		return typed("boolean")
	case reflect.Int, reflect.Int32, reflect.Int64:
		return typed("integer")
	case reflect.Float32, reflect.Float64:
		return typed("number")
	case reflect.Slice:
		s := typed("array")
		s["items"] = schemaOf(t.Elem())
		return s
	case reflect.Map:
		s := typed("object")
		s["additionalProperties"] = schemaOf(t.Elem())
		return s
	case reflect.Struct:
		s := typed("object")
		s["additionalProperties"] = false
		props := map[string]any{}
		addFields(t, props)
		s["properties"] = props
		return s
	}
	return map[string]any{}
}

func addFields(t reflect.Type, props map[string]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			addFields(f.Type, props)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		props[name] = schemaOf(f.Type)
	}
}

func typed(types ...string) map[string]any {
	ts := make([]any, 0, len(types)+1)
	for _, t := range types {
		ts = append(ts, t)
	}
	return map[string]any{"type": append(ts, "null")}
}

// mergeSchemas is the union of two versions' schemas: objects key by key,
// a key of two shapes (v1alpha1's runtime name, v1alpha3's runtime object)
// either.
func mergeSchemas(a, b map[string]any) map[string]any {
	if equalSchemas(a, b) {
		return a
	}
	pa, aObj := a["properties"].(map[string]any)
	pb, bObj := b["properties"].(map[string]any)
	if aObj && bObj {
		out := map[string]any{}
		for k, v := range a {
			out[k] = v
		}
		props := map[string]any{}
		for k, v := range pa {
			props[k] = v
		}
		for k, v := range pb {
			if cur, ok := props[k]; ok {
				props[k] = mergeSchemas(cur.(map[string]any), v.(map[string]any))
			} else {
				props[k] = v
			}
		}
		out["properties"] = props
		return out
	}
	var anyOf []any
	for _, s := range []map[string]any{a, b} {
		if alts, ok := s["anyOf"].([]any); ok {
			anyOf = append(anyOf, alts...)
		} else {
			anyOf = append(anyOf, s)
		}
	}
	return map[string]any{"anyOf": slices.CompactFunc(anyOf, func(x, y any) bool {
		return equalSchemas(x.(map[string]any), y.(map[string]any))
	})}
}

func equalSchemas(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
