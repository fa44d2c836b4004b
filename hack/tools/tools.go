//go:build tools

// Package tools pins the versions of the code generators the Makefile runs, so
// every checkout regenerates byte-identical CRDs, RBAC and deepcopy code, and
// of the linters it runs (actionlint: the GitHub Actions workflows).
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
