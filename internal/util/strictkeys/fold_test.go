package strictkeys

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFoldKey(t *testing.T) {
	cases := map[string]struct {
		a, b string
		same bool
		// unnamed: no struct field can carry a's name, so encoding/json
		// is not asked; only foldKey is checked.
		unnamed bool
	}{
		"equal":                           {a: "components", b: "components", same: true},
		"ASCII case":                      {a: "components", b: "Components", same: true},
		"all upper":                       {a: "components", b: "COMPONENTS", same: true},
		"long s folds to s":               {a: "components", b: "componentſ", same: true},
		"long s folds to S":               {a: "COMPONENTS", b: "componentſ", same: true},
		"Kelvin sign folds to k":          {a: "k", b: "\u212a", same: true},
		"Kelvin sign folds to K":          {a: "K", b: "\u212a", same: true},
		"Greek sigma forms":               {a: "σ", b: "ς", same: true},
		"Greek capital sigma":             {a: "Σ", b: "ς", same: true},
		"dotted capital I is not i":       {a: "i", b: "İ", same: false},
		"dotless i is not I":              {a: "I", b: "ı", same: false},
		"different letters":               {a: "components", b: "component", same: false},
		"underscore is not a dash":        {a: "image_id", b: "image-id", same: false},
		"an invalid byte is U+FFFD":       {a: "a\ufffd", b: "a\xff", same: true, unnamed: true},
		"each invalid byte is one U+FFFD": {a: "a\ufffd", b: "a\xff\xfe", same: false, unnamed: true},
		"two invalid bytes":               {a: "a\ufffd\ufffd", b: "a\xff\xfe", same: true, unnamed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.same, foldKey(tc.a) == foldKey(tc.b)); diff != "" {
				t.Errorf("foldKey(%q) == foldKey(%q) (-want +got):\n%s", tc.a, tc.b, diff)
			}
			field, ok := decodesInto(t, tc.a, tc.b)
			if diff := cmp.Diff(!tc.unnamed, ok); diff != "" {
				t.Fatalf("encoding/json can name a field %q (-want +got):\n%s", tc.a, diff)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.same, field); diff != "" {
				t.Errorf("encoding/json decodes %q into a field named %q (-want +got):\n%s", tc.b, tc.a, diff)
			}
		})
	}
}

// decodesInto asks encoding/json itself whether it decodes the key into a
// struct field it knows by the name field. ok is false when no struct field
// can carry that name (a name with a comma, say, or "-"): encoding/json
// then matches the key to no field, and only a repeated key can be lost.
func decodesInto(t *testing.T, field, key string) (decoded, ok bool) {
	t.Helper()
	typ := reflect.StructOf([]reflect.StructField{{
		Name: "F",
		Type: reflect.TypeFor[int](),
		Tag:  reflect.StructTag(`json:` + strconv.Quote(field)),
	}})
	v := reflect.New(typ)
	v.Elem().Field(0).SetInt(1)
	out, err := json.Marshal(v.Interface())
	if err != nil {
		t.Fatal(err)
	}
	named, err := json.Marshal(map[string]int{field: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, named) {
		return false, false
	}
	in, err := json.Marshal(map[string]int{key: 2})
	if err != nil {
		t.Fatal(err)
	}
	v = reflect.New(typ)
	if err := json.Unmarshal(in, v.Interface()); err != nil {
		t.Fatal(err)
	}
	return v.Elem().Field(0).Int() == 2, true
}
