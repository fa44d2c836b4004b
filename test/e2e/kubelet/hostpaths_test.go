//go:build linux

package kubelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// hostPaths are the machine's directories the nodes' mount namespaces
// cover with private ones (hack/kubecluster): the tier must leave them as
// it found them. The workers' state file lands in the node's own
// /var/lib/eraser, never in the machine's.
var hostPaths = []string{"/var/lib/eraser", "/var/lib/containerd", "/var/lib/containers", "/run/crio"}

// hostPathState is whether a host directory existed before the tier ran,
// and what it held.
type hostPathState struct {
	existed bool
	entries map[string]bool
}

func snapshotHostPaths() map[string]hostPathState {
	out := map[string]hostPathState{}
	for _, p := range hostPaths {
		entries, err := os.ReadDir(p)
		st := hostPathState{existed: err == nil, entries: map[string]bool{}}
		for _, e := range entries {
			st.entries[e.Name()] = true
		}
		out[p] = st
	}
	return out
}

// restoreHostPaths puts the host directories back as they were: one the
// tier created (the teardown removes the mount points it made) is removed,
// and in one that existed only what the tier added (a state file such as
// images.state, were a worker ever to write the machine's directory) is.
// Either is reported as an error: the nodes' private mounts should have
// kept the machine's directories untouched.
func restoreHostPaths(before map[string]hostPathState) error {
	var errs []error
	for _, p := range hostPaths {
		was := before[p]
		entries, err := os.ReadDir(p)
		if err != nil {
			if !os.IsNotExist(err) {
				errs = append(errs, err)
			}
			continue
		}
		if !was.existed {
			errs = append(errs, fmt.Errorf("%s did not exist before the tier ran and was left behind (removed now)", p))
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range entries {
			if was.entries[e.Name()] {
				continue
			}
			path := filepath.Join(p, e.Name())
			errs = append(errs, fmt.Errorf("%s was written by the tier (removed now)", path))
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
