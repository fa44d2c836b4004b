#!/usr/bin/env bash
# Proves that `make verify` catches stale generated code and committed
# binaries: in a scratch copy of the tree (a git repository of its own, so
# that verify sees git's file list there), change an API type without
# regenerating, or add a compiled executable, and expect verify to fail; the
# untouched copy must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$scratch"
mkdir -p "$scratch/bin" && cp bin/controller-gen "$scratch/bin/"
git_scratch() { git -C "$scratch" -c user.name=selftest -c user.email=selftest@invalid "$@"; }
git_scratch init -q && git_scratch add -A && git_scratch commit -q -m scratch

if ! (cd "$scratch" && make --no-print-directory -s verify >/dev/null 2>&1); then
  echo "verify-selftest: verify fails on the unmodified tree" >&2
  exit 1
fi

# A new optional status field, as a developer would add it.
sed -i 's|^\tResults \*ImageResults `json:"results,omitempty"`$|&\n\n\t// +optional\n\tStaleProbe string `json:"staleProbe,omitempty"`|' "$scratch/api/v1/imagelist_types.go"
grep -q StaleProbe "$scratch/api/v1/imagelist_types.go"
if (cd "$scratch" && make --no-print-directory -s verify >"$scratch/verify.log" 2>&1); then
  echo "verify-selftest: verify passed although the CRD was stale" >&2
  exit 1
fi
grep -q "config/crd was stale" "$scratch/verify.log"
echo "verify-selftest: stale CRD detected"

# Back to the committed tree, then a compiled program added as a developer
# might after a `go build` in the wrong directory.
git_scratch checkout -q -- . && git_scratch clean -qfdx -e bin/
cp /bin/true "$scratch/hack/true" && git_scratch add hack/true
if (cd "$scratch" && make --no-print-directory -s verify >"$scratch/verify.log" 2>&1); then
  echo "verify-selftest: verify passed although the tree holds a binary" >&2
  exit 1
fi
if ! grep -q "hack/true (ELF)" "$scratch/verify.log"; then
  echo "verify-selftest: verify failed without naming the binary:" >&2
  cat "$scratch/verify.log" >&2
  exit 1
fi
echo "verify-selftest: binary detected (hack/true)"
echo "verify-selftest: ok (stale CRD and binary detected)"
