// Package scheme registers the kinds Eraser's manager, command-line tools
// and tests read and write: the built-in kinds and the eraser.sh API.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// New returns a scheme with the built-in kinds and the eraser.sh API.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := eraserv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
