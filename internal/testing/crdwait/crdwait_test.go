package crdwait

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestEstablished(t *testing.T) {
	cond := func(typ apiextensionsv1.CustomResourceDefinitionConditionType, s apiextensionsv1.ConditionStatus) apiextensionsv1.CustomResourceDefinitionCondition {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: typ, Status: s}
	}
	cases := map[string]struct {
		conds []apiextensionsv1.CustomResourceDefinitionCondition
		want  bool
	}{
		"no conditions":          {},
		"names accepted only":    {conds: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue)}},
		"established false":      {conds: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.Established, apiextensionsv1.ConditionFalse)}},
		"established":            {conds: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.Established, apiextensionsv1.ConditionTrue)}, want: true},
		"established among more": {conds: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue), cond(apiextensionsv1.Established, apiextensionsv1.ConditionTrue)}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: tc.conds}}
			if got := established(crd); got != tc.want {
				t.Errorf("established = %v, want %v", got, tc.want)
			}
		})
	}
}
