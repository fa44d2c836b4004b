package helmtier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// olderChart is this chart as an earlier version of it was: without a key
// this version added (openshift: its values, default, schema and
// template) and with an ImageJob CRD that lacks status.report. Upgrading
// from it with --reuse-values keeps values that lack the new key.
func olderChart(t *testing.T) string {
	t.Helper()
	dir := chartWithoutField(t, "report")
	for _, f := range []string{"values.yaml", filepath.Join("files", "values-defaults.yaml")} {
		path := filepath.Join(dir, f)
		var v map[string]any
		b, err := os.ReadFile(path)
		if err == nil {
			err = yaml.Unmarshal(b, &v)
		}
		if err != nil {
			t.Fatal(err)
		}
		delete(v, "openshift")
		if b, err = yaml.Marshal(v); err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	schemaPath := filepath.Join(dir, "values.schema.json")
	var schema map[string]any
	b, err := os.ReadFile(schemaPath)
	if err == nil {
		err = json.Unmarshal(b, &schema)
	}
	if err != nil {
		t.Fatal(err)
	}
	delete(schema["properties"].(map[string]any), "openshift")
	if b, err = json.Marshal(schema); err == nil {
		err = os.WriteFile(schemaPath, b, 0o644)
	}
	if err == nil {
		err = os.Remove(filepath.Join(dir, "templates", "openshift.yaml"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// helm rollback, with each Helm CLI: from this chart back to upstream's
// release and forward again, and from this chart back to its previous
// version and forward again (with --reuse-values, whose values lack the
// newer key). Every ImageList and ImageJob stays, the CRDs serve each
// release's schema, and forward again the manager takes the lists up:
// those there before this chart first came are judged as after upstream,
// those created since run.
func TestRollback(t *testing.T) {
	t.Run("to upstream's release", func(t *testing.T) {
		eachHelm(t, func(t *testing.T, c *cluster) {
			c.createNamespace()
			c.helm("install", release, upstreamShapedChart(), "-n", namespace)
			c.waitEstablished()
			c.createUserObjects()
			c.helm(append([]string{"upgrade", release, ourChart(), "-n", namespace}, releaseImages...)...)
			c.servesOurCRDs()

			c.helm("rollback", release, "1", "-n", namespace)
			c.userObjectsKept("after helm rollback to upstream's release")
			if history := c.helm("history", release, "-n", namespace); !strings.Contains(history, "Rollback to 1") {
				t.Errorf("helm history does not show the rollback:\n%s", history)
			}

			c.helm(append([]string{"upgrade", release, ourChart(), "-n", namespace}, releaseImages...)...)
			c.userObjectsKept("after upgrading again")
			c.servesOurCRDs()
			c.managerTakesOver("migrate-v1", eraserv1.ReasonNotRunOnAdoption)
		})
	})
	t.Run("to this chart's previous version", func(t *testing.T) {
		eachHelm(t, func(t *testing.T, c *cluster) {
			c.createNamespace()
			c.helm(append([]string{"install", release, olderChart(t), "-n", namespace}, releaseImages...)...)
			c.waitEstablished()
			c.createUserObjects()
			c.helm("upgrade", release, ourChart(), "-n", namespace, "--reuse-values")
			if !c.hasStatusField("report") {
				t.Error("the upgrade did not bring the CRD's new field")
			}
			c.helm("rollback", release, "1", "-n", namespace)
			c.userObjectsKept("after helm rollback to the previous version")
			if c.hasStatusField("report") {
				t.Error("the rollback kept the newer CRD: Helm rolls the CRDs back with the release")
			}
			c.helm("upgrade", release, ourChart(), "-n", namespace, "--reuse-values")
			c.userObjectsKept("after upgrading again")
			c.servesOurCRDs()
			// Created after this chart was first installed: it runs.
			c.managerTakesOver("migrate-v1", "")
		})
	})
}
