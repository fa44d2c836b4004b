package jsonfields

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	Depth int `json:"depth"`
}

type Embedded struct {
	Shared string `json:"shared"`
}

type sample struct {
	Tagged   string `json:"tagged,omitempty"`
	Untagged bool
	Skipped  int    `json:"-"`
	hidden   int    // encoding/json never sets it, whatever the document says
	Nested   inner  `json:"nested"`
	Inlined  *inner `json:",inline"`
	Embedded
}

var _ = sample{}.hidden // the field exists only to be skipped

func TestOf(t *testing.T) {
	got := map[string]string{}
	for k, v := range Of(reflect.TypeFor[sample]()) {
		got[k] = v.String()
	}
	want := map[string]string{
		"tagged":   "string",
		"Untagged": "bool",
		"nested":   "jsonfields.inner",
		"depth":    "int",
		"shared":   "string",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Of (-want +got):\n%s", diff)
	}
}
