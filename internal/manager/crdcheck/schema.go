package crdcheck

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Missing returns the fields the schema would prune, each as the shortest
// path the schema lacks (status.report, not every field below it), in the
// order of fields, once each.
//
// Pruning keeps a field that a node's properties declare, every field of a
// node marked x-kubernetes-preserve-unknown-fields, and every value of a
// map (additionalProperties); a list keeps what its items' schema keeps.
func Missing(schema *apiextensionsv1.JSONSchemaProps, fields [][]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range fields {
		n, ok := lacks(schema, f)
		if !ok {
			continue
		}
		p := String(f[:n+1])
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// lacks reports whether the schema prunes path, and if so the index of the
// first segment it does not keep.
func lacks(s *apiextensionsv1.JSONSchemaProps, path []string) (int, bool) {
	for i, seg := range path {
		if s == nil {
			return i, true
		}
		preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
		switch seg {
		case items:
			if s.Items == nil || s.Items.Schema == nil {
				return i, !preserve
			}
			s = s.Items.Schema
		case values:
			switch ap := s.AdditionalProperties; {
			case ap != nil && ap.Schema != nil:
				s = ap.Schema
			case ap != nil && ap.Allows, preserve:
				return 0, false
			default:
				return i, true
			}
		default:
			p, declared := s.Properties[seg]
			if !declared {
				return i, !preserve
			}
			s = &p
		}
	}
	return 0, false
}

// ServedSchema returns the schema a CRD serves at version, or why it serves
// none.
func ServedSchema(crd *apiextensionsv1.CustomResourceDefinition, version string) (*apiextensionsv1.JSONSchemaProps, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		if !v.Served {
			return nil, fmt.Errorf("does not serve %s", version)
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("has no schema for %s", version)
		}
		return v.Schema.OpenAPIV3Schema, nil
	}
	return nil, fmt.Errorf("has no version %s", version)
}
