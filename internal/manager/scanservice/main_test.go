package scanservice

import (
	"os"
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

var controlPlane *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &controlPlane)) }
