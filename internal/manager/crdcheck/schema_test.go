package crdcheck

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func object(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
}

var (
	str      = apiextensionsv1.JSONSchemaProps{Type: "string"}
	integer  = apiextensionsv1.JSONSchemaProps{Type: "integer"}
	yes      = true
	preserve = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}
)

func list(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
}

func mapOf(v apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &v}}
}

// paths reads the paths String writes, for the tests' tables.
func paths(ps ...string) [][]string {
	r := strings.NewReplacer("[*]", "."+items, ".*", "."+values)
	var out [][]string
	for _, p := range ps {
		out = append(out, strings.Split(r.Replace(p), "."))
	}
	return out
}

func TestMissing(t *testing.T) {
	job := object(map[string]apiextensionsv1.JSONSchemaProps{
		"status": object(map[string]apiextensionsv1.JSONSchemaProps{
			"desired": integer,
			"report":  object(map[string]apiextensionsv1.JSONSchemaProps{"namespace": str}),
			"failedNodes": list(object(map[string]apiextensionsv1.JSONSchemaProps{
				"node": str,
			})),
			"failedIndexes": mapOf(str),
			"names":         list(str),
		}),
	})
	cases := map[string]struct {
		schema apiextensionsv1.JSONSchemaProps
		fields [][]string
		want   []string
	}{
		"every field declared": {schema: job, fields: paths("status.desired", "status.report.namespace", "status.failedNodes[*].node", "status.failedIndexes.*", "status.names[*]")},
		"a field absent":       {schema: job, fields: paths("status.desired", "status.started"), want: []string{"status.started"}},
		"a whole object absent is named once": {
			schema: object(map[string]apiextensionsv1.JSONSchemaProps{"status": object(nil)}),
			fields: paths("status.report.namespace", "status.report.selector", "status.report.configMaps[*]"),
			want:   []string{"status.report"},
		},
		"a field of a declared object absent": {schema: job, fields: paths("status.report.namespace", "status.report.selector"), want: []string{"status.report.selector"}},
		"a field of list items absent":        {schema: job, fields: paths("status.failedNodes[*].node", "status.failedNodes[*].reason"), want: []string{"status.failedNodes[*].reason"}},
		"a list without items": {
			schema: object(map[string]apiextensionsv1.JSONSchemaProps{"l": {Type: "array"}}),
			fields: paths("l[*].a"),
			want:   []string{"l[*]"},
		},
		"a map declared as a plain object": {
			schema: object(map[string]apiextensionsv1.JSONSchemaProps{"m": object(nil)}),
			fields: paths("m.*"),
			want:   []string{"m.*"},
		},
		"a map of anything": {
			schema: object(map[string]apiextensionsv1.JSONSchemaProps{"m": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}}}),
			fields: paths("m.*.a"),
		},
		"a map whose values lack a field": {
			schema: object(map[string]apiextensionsv1.JSONSchemaProps{"m": mapOf(object(map[string]apiextensionsv1.JSONSchemaProps{"a": str}))}),
			fields: paths("m.*.a", "m.*.b"),
			want:   []string{"m.*.b"},
		},
		"unknown fields preserved below status": {
			schema: object(map[string]apiextensionsv1.JSONSchemaProps{"status": preserve}),
			fields: paths("status.started", "status.report.namespace", "status.failedIndexes.*", "status.failedNodes[*].node"),
		},
		"a declared field below a preserving node is checked": {
			schema: object(map[string]apiextensionsv1.JSONSchemaProps{"status": {
				Type: "object", XPreserveUnknownFields: &yes,
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"report": object(nil)},
			}}),
			fields: paths("status.started", "status.report.namespace"),
			want:   []string{"status.report.namespace"},
		},
		"no status at all": {schema: object(nil), fields: paths("spec.images[*]", "status.desired", "status.failed"), want: []string{"spec", "status"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Missing(&tc.schema, tc.fields)); diff != "" {
				t.Errorf("Missing (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServedSchema(t *testing.T) {
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}
	cases := map[string]struct {
		versions []apiextensionsv1.CustomResourceDefinitionVersion
		want     string
	}{
		"served":      {versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true}, {Name: "v1", Served: true, Schema: schema}}},
		"not served":  {versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: false, Schema: schema}}, want: "does not serve v1"},
		"no version":  {versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Schema: schema}}, want: "has no version v1"},
		"no schema":   {versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true}}, want: "has no schema for v1"},
		"no versions": {want: "has no version v1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: tc.versions}}
			got := ""
			if _, err := ServedSchema(crd, "v1"); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ServedSchema (-want +got):\n%s", diff)
			}
		})
	}
}
