#!/usr/bin/env bash
# Proves that `make verify` catches stale generated code: in a scratch copy of
# the tree, change an API type without regenerating and expect verify to fail;
# the untouched copy must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$scratch"
mkdir -p "$scratch/bin" && cp bin/controller-gen "$scratch/bin/"

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
echo "verify-selftest: ok (stale CRD detected)"
