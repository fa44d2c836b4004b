//go:build tools

// Package tools pins the versions of the code generators the Makefile runs, so
// every checkout regenerates byte-identical CRDs, RBAC and deepcopy code.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
