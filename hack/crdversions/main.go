// Command crdversions adds the deprecated eraser.sh/v1alpha1 version to the
// CRDs that controller-gen writes from api/v1.
//
// Upstream Eraser serves v1alpha1 with exactly the v1 schema and no conversion
// webhook. Generating that version from the v1 schema, rather than keeping a
// second copy of the Go types, makes it impossible for the two to drift.
//
//	go run ./hack/crdversions config/crd/bases
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	deprecatedVersion = "v1alpha1"
	storedVersion     = "v1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdversions DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*.yaml"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no CRDs in %s", os.Args[1])
	}
	for _, f := range files {
		if err != nil {
			break
		}
		err = rewrite(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdversions:", err)
		os.Exit(1)
	}
}

func rewrite(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(in, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := addDeprecatedVersion(&crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	// The status block is server-owned and meaningless in a manifest.
	out = bytes.Replace(out, []byte("status:\n  acceptedNames:\n    kind: \"\"\n    plural: \"\"\n  conditions: null\n  storedVersions: null\n"), nil, 1)
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// addDeprecatedVersion makes the served v1alpha1 version a copy of the stored
// v1 version; it is idempotent.
func addDeprecatedVersion(crd *apiextensionsv1.CustomResourceDefinition) error {
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == deprecatedVersion
	})
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == storedVersion
	})
	if i < 0 || !crd.Spec.Versions[i].Storage {
		return fmt.Errorf("no stored %s version", storedVersion)
	}
	old := *crd.Spec.Versions[i].DeepCopy()
	old.Name = deprecatedVersion
	old.Storage = false
	old.Deprecated = true
	warning := fmt.Sprintf("%s/%s %s is deprecated; use %s/%s", crd.Spec.Group, deprecatedVersion, crd.Spec.Names.Kind, crd.Spec.Group, storedVersion)
	old.DeprecationWarning = &warning
	crd.Spec.Versions = append(crd.Spec.Versions, old)
	return nil
}
