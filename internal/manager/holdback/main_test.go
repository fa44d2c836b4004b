package holdback

import (
	"os"
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }
