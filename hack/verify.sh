#!/usr/bin/env bash
# Regenerates deepcopy code, CRDs, RBAC, the chart's CRDs and
# deploy/eraser.yaml and fails if that changed anything,
# or if go.mod/go.sum are untidy or Go files unformatted. Run by `make verify`
# (and so by `make test` and CI). The regenerated files are left in place, so
# after a failure `git diff` shows what to commit.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}

generated=(api config/crd config/rbac charts/eraser/crds charts/eraser/files deploy)
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
tar -cf - "${generated[@]}" | tar -xf - -C "$before"

fail=0
$MAKE --no-print-directory -s generate manifests >/dev/null
for p in "${generated[@]}"; do
  if ! diff -r "$before/$p" "$p" >/dev/null; then
    echo "verify: generated code in $p was stale; it has been regenerated, review and commit it:" >&2
    diff -ru "$before/$p" "$p" | head -40 >&2 || true
    fail=1
  fi
done

unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
  echo "verify: gofmt needed on:" >&2
  echo "$unformatted" >&2
  fail=1
fi

for mod in . hack/tools hack/render scanner/trivy; do
  if ! (cd "$mod" && go mod tidy -diff >/dev/null 2>&1); then
    echo "verify: go mod tidy would change $mod/go.mod or go.sum" >&2
    fail=1
  fi
done

$MAKE --no-print-directory -s lint-workflows >&2 || { echo "verify: actionlint: fix .github/workflows (make lint-workflows)" >&2; fail=1; }  # release-registry: workflow lint

if [ "$fail" = 0 ]; then echo "verify: ok"; fi
exit "$fail"
