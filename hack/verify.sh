#!/usr/bin/env bash
# Regenerates deepcopy code, CRDs, RBAC, the chart's CRDs and
# deploy/eraser.yaml and fails if that changed anything,
# or if go.mod/go.sum are untidy or Go files unformatted, or if the tree holds
# a file over 1 MiB or a compiled executable, or a relative markdown link is
# broken, or the map of the packages (docs/dev/packages.md) misses one, or an
# import crosses the layers the wrong way (hack/layers), or two of the modules build
# a module they share at two versions. Run by `make verify`
# (and so by `make test` and CI). The regenerated files are left in place, so
# after a failure `git diff` shows what to commit.
set -euo pipefail
export LC_ALL=C # byte-wise reads of file magic below
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}

generated=(api config/crd config/rbac charts/eraser/files charts/eraser/values.schema.json deploy)
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

# The tree's files: git's tracked and not-ignored untracked files (what a
# commit could take), or, outside a git work tree, every file but bin/.
tree_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard
  else
    find . -path ./.git -prune -o -path ./bin -prune -o -type f -printf '%P\0'
  fi
}

# No build output in the tree: nothing over 1 MiB, and no executable in a
# binary format (ELF, PE/MZ, Mach-O; scripts with a shebang are fine).
max_bytes=$((1024 * 1024))
too_big=() binaries=()
while IFS= read -r -d '' f; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  size=$(stat -c %s -- "$f")
  if [ "$size" -gt "$max_bytes" ]; then too_big+=("$f ($size bytes)"); fi
  magic=
  IFS= read -r -d '' -n 4 magic <"$f" || true
  case "$magic" in
  $'\x7fELF'*) binaries+=("$f (ELF)") ;;
  MZ*) binaries+=("$f (PE/MZ)") ;;
  $'\xfe\xed\xfa\xce' | $'\xfe\xed\xfa\xcf' | $'\xce\xfa\xed\xfe' | $'\xcf\xfa\xed\xfe' | $'\xca\xfe\xba\xbe')
    binaries+=("$f (Mach-O)") ;;
  esac
done < <(tree_files)
if [ "${#too_big[@]}" -gt 0 ]; then
  echo "verify: files over 1 MiB in the tree (build outputs belong in bin/, data in shared storage):" >&2
  printf '  %s\n' "${too_big[@]}" >&2
  fail=1
fi
if [ "${#binaries[@]}" -gt 0 ]; then
  echo "verify: executable binaries in the tree (build them with make build; never commit them):" >&2
  printf '  %s\n' "${binaries[@]}" >&2
  fail=1
fi

# The contributors' map of the code lists every package under internal/.
if ! go run ./hack/layoutmap; then
  echo "verify: docs/dev/packages.md's map of the packages is out of date (above)" >&2
  fail=1
fi

# The node side and the manager side never import each other, the formats
# they share import neither, and nothing below the front ends imports them;
# tests included.
if ! go run ./hack/layers; then
  echo "verify: imports that cross the layers the wrong way (above)" >&2
  fail=1
fi

# Relative markdown links name files that exist, and headings that do.
mapfile -d '' docs < <(tree_files | grep -z '\.md$')
if [ "${#docs[@]}" -gt 0 ] && ! go run ./hack/doclinks "${docs[@]}" >&2; then
  echo "verify: broken links in the docs (above)" >&2
  fail=1
fi

# The pages for the people who run Eraser speak of the product: no internal
# packages or Go identifiers, no commit hashes (the pages for contributors,
# under docs/dev/, may).
user_pages=(README.md charts/eraser/README.md docs/*.md)
internal_words=$(grep -n -E '`internal/|`[a-z]+\.[A-Z][A-Za-z]+`|`[0-9a-f]{7,40}`' "${user_pages[@]}" || true)
if [ -n "$internal_words" ]; then
  echo "verify: user pages name internal packages, Go identifiers or commits:" >&2
  echo "$internal_words" >&2
  fail=1
fi

for mod in . hack/tools hack/render scanner/trivy test/bench/regret; do
  if ! (cd "$mod" && go mod tidy -diff >/dev/null 2>&1); then
    echo "verify: go mod tidy would change $mod/go.mod or go.sum" >&2
    fail=1
  fi
done

# One version of each module whose packages two of our modules both build:
# the operator's, the install tier's (hack/render) and the code generators'
# (hack/tools). Their shared packages (client-go, apimachinery, the API
# types, gRPC) then compile once for all three, and for the control plane,
# which hack/build-control-plane.sh raises to these versions; at different
# versions a cold make test compiled them once per version. The Trivy
# module builds under GOEXPERIMENT=jsonv2, which shares no compiled package
# with the rest, so it may differ; so may the regret benchmark's
# (test/bench/regret), which only make bench-regret builds and which takes
# k8s.io/kubernetes's versions.
selected() { # module dir, packages: "path version" of each module their build (tests too) compiles
  go -C "$1" list -deps -test -f '{{with .Module}}{{if .Version}}{{.Path}} {{.Version}}{{end}}{{end}}' "${@:2}" | sort -u
}
ours=$(selected . ./...)
for spec in "hack/render ./..." "hack/tools sigs.k8s.io/controller-tools/cmd/controller-gen github.com/rhysd/actionlint/cmd/actionlint"; do
  read -r -a args <<<"$spec"
  skew=$(join <(echo "$ours") <(selected "${args[@]}") | awk -v m="${args[0]}" '$2 != $3 {print "  " $1 ": " $2 " in the root module, " $3 " in " m}')
  if [ -n "$skew" ]; then
    echo "verify: modules whose packages the root module and ${args[0]} both compile, at two versions (go get the higher one in both, then go mod tidy):" >&2
    echo "$skew" >&2
    fail=1
  fi
done

$MAKE --no-print-directory -s lint-workflows >&2 || { echo "verify: actionlint: fix .github/workflows (make lint-workflows)" >&2; fail=1; }  # release-registry: workflow lint

if [ "$fail" = 0 ]; then echo "verify: ok"; fi
exit "$fail"
