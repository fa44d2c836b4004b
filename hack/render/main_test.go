package render

import (
	"os"
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

var env *testenv.Env

// The control plane enforces owner-reference permissions, as OpenShift and
// other hardened clusters do: the shipped RBAC must be enough there too.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Tier("install"), testenv.WithAPIServerFlag("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")))
}
