package crdcheck

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

type inner struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
}

type embedded struct {
	E int `json:"e"`
}

type selfRef struct {
	Next *selfRef `json:"next,omitempty"`
}

func TestFields(t *testing.T) {
	cases := map[string]struct {
		typ  reflect.Type
		want []string
	}{
		"scalars and omitempty": {typ: reflect.TypeFor[inner](), want: []string{"a", "b"}},
		"pointer to a struct": {typ: reflect.TypeFor[struct {
			P *inner `json:"p"`
		}](), want: []string{"p.a", "p.b"}},
		"list of structs": {typ: reflect.TypeFor[struct {
			L []inner `json:"l"`
		}](), want: []string{"l[*].a", "l[*].b"}},
		"list of strings": {typ: reflect.TypeFor[struct {
			L []string `json:"l"`
		}](), want: []string{"l[*]"}},
		"bytes are a string": {typ: reflect.TypeFor[struct {
			B []byte `json:"b"`
		}](), want: []string{"b"}},
		"map of strings": {typ: reflect.TypeFor[struct {
			M map[string]string `json:"m"`
		}](), want: []string{"m.*"}},
		"map of structs": {typ: reflect.TypeFor[struct {
			M map[string]inner `json:"m"`
		}](), want: []string{"m.*.a", "m.*.b"}},
		"a timestamp is one field": {typ: reflect.TypeFor[struct {
			T *metav1.Time `json:"t"`
		}](), want: []string{"t"}},
		"embedded fields are promoted": {typ: reflect.TypeFor[struct {
			embedded
			F int `json:"f"`
		}](), want: []string{"e", "f"}},
		"inline tag": {typ: reflect.TypeFor[struct {
			embedded `json:",inline"`
		}](), want: []string{"e"}},
		"skipped and unexported": {typ: reflect.TypeFor[struct {
			S int `json:"-"`
			u int
			N int
		}](), want: []string{"N"}},
		"type meta and object meta left out": {typ: reflect.TypeFor[struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata,omitempty"`
			Status            inner `json:"status"`
		}](), want: []string{"status.a", "status.b"}},
		"a type that contains itself": {typ: reflect.TypeFor[selfRef](), want: []string{"next"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, render(Fields(tc.typ))); diff != "" {
				t.Errorf("Fields (-want +got):\n%s", diff)
			}
		})
	}
}

// The fields the manager's bookkeeping depends on are among those checked.
func TestFieldsOfTheAPI(t *testing.T) {
	cases := map[string]struct {
		typ  reflect.Type
		want []string
	}{
		"ImageJob": {typ: reflect.TypeFor[eraserv1.ImageJob](), want: []string{
			"status.started", "status.waitingIndexes", "status.failedIndexes.*", "status.report.namespace",
			"status.report.configMaps[*]", "status.failedNodes[*].reason", "status.conditions[*].lastTransitionTime",
		}},
		"ImageList": {typ: reflect.TypeFor[eraserv1.ImageList](), want: []string{
			"spec.images[*]", "spec.dryRun", "status.conditions[*].type", "status.results.removed",
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]bool{}
			for _, p := range render(Fields(tc.typ)) {
				got[p] = true
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("Fields(%s) lacks %s", name, w)
				}
			}
		})
	}
}

func render(paths [][]string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, String(p))
	}
	return out
}
