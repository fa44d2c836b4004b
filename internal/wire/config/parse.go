package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/util/strictkeys"
)

// MaxDocumentSize bounds a document: a ConfigMap holds at most 1 MiB.
const MaxDocumentSize = 1 << 20

// Parse reads an EraserConfig document of any supported version. It returns
// the configuration with defaults applied, warnings about keys and values
// that have no effect, and an error listing every invalid value and every
// unknown key by its field path.
func Parse(data []byte) (*Config, []string, error) {
	if len(data) > MaxDocumentSize {
		return nil, nil, fmt.Errorf("EraserConfig is %d bytes, more than the %d a ConfigMap can hold", len(data), MaxDocumentSize)
	}
	// YAMLToJSON keeps the last of two equal keys without a word: a
	// repeated nodeFilter, say, would drop the first one's selectors.
	if err := strictkeys.YAML(data); err != nil {
		return nil, nil, fmt.Errorf("EraserConfig: %w", err)
	}
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("EraserConfig is not valid YAML: %w", err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, nil, fmt.Errorf("EraserConfig is not valid YAML: %w", err)
	}
	top, ok := generic.(map[string]any)
	if !ok {
		return nil, nil, errors.New("EraserConfig must be a YAML mapping with apiVersion, kind, manager and components")
	}

	apiVersion, _ := top["apiVersion"].(string)
	doc, ok := defaultDocument(apiVersion)
	if !ok {
		return nil, nil, field.ErrorList{unsupportedVersion(top["apiVersion"])}.ToAggregate()
	}

	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(doc); err != nil {
		return nil, nil, field.ErrorList{decodeError(err, apiVersion)}.ToAggregate()
	}

	// Unknown keys come first: a misspelt key often explains a value
	// error further down (a default that was meant to be replaced).
	errs := unknownKeys(reflect.TypeOf(doc), generic, nil)
	warnings := ignoredKeyWarnings(top)
	cfg, more, invalid := convert(doc)
	warnings = append(warnings, more...)
	errs = append(errs, invalid...)
	if len(errs) > 0 {
		return nil, warnings, errs.ToAggregate()
	}
	return cfg, warnings, nil
}

func unsupportedVersion(v any) *field.Error {
	supported := []string{VersionV1alpha1, VersionV1alpha2, VersionV1alpha3}
	if v == nil {
		return field.Required(field.NewPath("apiVersion"), "one of "+strings.Join(supported, ", "))
	}
	return field.NotSupported(field.NewPath("apiVersion"), v, supported)
}

// decodeError turns a JSON type error into a field error with its path.
func decodeError(err error, apiVersion string) *field.Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		p := pathOf(typeErr.Field)
		detail := fmt.Sprintf("must be %s, not a %s", describeType(typeErr.Type), typeErr.Value)
		if p.String() == "manager.runtime" && apiVersion == VersionV1alpha3 {
			detail += fmt.Sprintf(" (since %s the runtime is {name, address})", VersionV1alpha3)
		}
		return &field.Error{Type: field.ErrorTypeInvalid, Field: p.String(), BadValue: field.OmitValueType{}, Detail: detail}
	}
	// A scalar's own error does not carry a path; say what it is at least.
	return field.Invalid(field.NewPath("<document>"), nil, err.Error())
}

// embeddedNames are the Go names of the structs the documents embed, which
// encoding/json puts in its error paths although they are not YAML keys.
var embeddedNames = map[string]bool{"document": true, "managerCommon": true}

func pathOf(dotted string) *field.Path {
	var p *field.Path
	for _, s := range strings.Split(dotted, ".") {
		if !embeddedNames[s] {
			p = childPath(p, s)
		}
	}
	return p
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

func childPath(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}
