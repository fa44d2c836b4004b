package ctrdrecords

import (
	"context"
	"errors"
)

// Read is not built on Windows: containerd's client there brings the host
// compute service's packages, and Windows nodes' leftovers are not read yet.
func Read(context.Context, string) (Records, error) {
	return Records{}, errors.New("reading containerd's records is not supported on Windows nodes")
}
