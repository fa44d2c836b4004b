#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from the Go module proxy into a cache
# directory keyed by version, once. No prebuilt Kubernetes binaries can be
# downloaded where this project is tested, so this is how envtest gets its assets.
#
#   hack/build-control-plane.sh            # prints the asset directory on stdout
#   EXTRA=1 hack/build-control-plane.sh    # also kube-controller-manager, kube-scheduler
#   KUBELET=1 hack/build-control-plane.sh  # also the kubelet (for the kubelet e2e tier and the demo)
#   CHECK_ONLY=1 hack/build-control-plane.sh  # print the directory if built, else exit 1
#
# Environment: ERASER_CACHE (default ~/.cache/eraser), KUBE_VERSION, ETCD_VERSION.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
CACHE=${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}
OUT="${CACHE}/control-plane/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}"
WORK="${CACHE}/control-plane/src"
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"
MINOR=$(echo "${KUBE_VERSION}" | cut -d. -f2)

ROOT=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "[control-plane] $*" >&2; }

# align raises the module in the current directory to the versions this
# repository's module selects, where those are newer (MVS keeps the higher
# of the two, so nothing goes below what Kubernetes or etcd ask for). The
# packages both build (client-go, apimachinery, the API types, gRPC: about
# 1,000 of the control plane's 2,500) then have one identity in the build
# cache, and a cold make test compiles them once instead of once per
# version. The differences are patch and minor releases of golang.org/x
# and logging modules.
align() {
  local LC_ALL=C
  local ours theirs args
  ours=$(go -C "${ROOT}" list -m -f '{{.Path}} {{.Version}}' all 2>/dev/null | sort) || {
    log "not aligning with ${ROOT}'s module (go list failed); the build goes on unshared"
    return 0
  }
  theirs=$(go list -m -f '{{.Path}} {{.Version}}' all | sort)
  args=$(join <(echo "${theirs}") <(echo "${ours}") | awk '$2 != $3 && $3 != "" {printf "-require=%s@%s ", $1, $3}')
  if [ -n "${args}" ]; then
    # shellcheck disable=SC2086 # one word per requirement
    go mod edit ${args}
    go mod tidy
  fi
}

want=(kube-apiserver kubectl etcd)
[ "${EXTRA:-0}" = 1 ] && want+=(kube-controller-manager kube-scheduler)
[ "${KUBELET:-0}" = 1 ] && want+=(kubelet)
missing=()
for b in "${want[@]}"; do [ -x "${OUT}/${b}" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "${OUT}"
  exit 0
fi
[ "${CHECK_ONLY:-0}" = 1 ] && exit 1

mkdir -p "${OUT}" "${WORK}"
# make test builds the control plane from two tiers at once (the fault tier
# runs beside the others, and make prebuild adds the kubelet): one build at a
# time, and a waiter takes what the build before it left.
# shellcheck source=hack/lock.sh
. "$(dirname "$0")/lock.sh"
lock "control-plane-kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}"
missing=()
for b in "${want[@]}"; do [ -x "${OUT}/${b}" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "${OUT}"
  exit 0
fi
# make test's build configuration (the Makefile's GOFLAGS), so that what the
# control plane shares with the tests compiles once.
export GOFLAGS="-buildvcs=false -trimpath -tags=grpcnotrace" GOTOOLCHAIN=local CGO_ENABLED=0

build_kube() {
  local dir="${WORK}/kube-${KUBE_VERSION}"
  mkdir -p "${dir}"
  cd "${dir}"
  # A module resolved before the kubelet was among the tools lacks its
  # dependencies in go.sum; resolve again (same versions: the requirements all
  # come from k8s.io/kubernetes' own go.mod).
  if [ -s go.sum ] && ! grep -q cmd/kubelet tools.go; then rm -f go.sum; fi
  if [ ! -s go.sum ]; then
    log "resolving k8s.io/kubernetes ${KUBE_VERSION} (staging modules pinned to ${STAGING_VERSION})"
    local modfile
    modfile=$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    local gover
    gover=$(awk '/^go /{print $2; exit}' "${modfile}")
    # k8s.io/kubernetes requires every staging module at v0.0.0 with a replace to
    # ./staging; point each at its published version. The two sample modules are
    # not published and nothing we build needs them.
    {
      printf 'module eraser.local/controlplane\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "${gover}" "${KUBE_VERSION}"
      awk '/=> \.\/staging\/src\//{print $1}' "${modfile}" | grep -vE 'sample-(cli-plugin|controller)$' |
        while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "${STAGING_VERSION}"; done
      printf ')\n'
    } > go.mod
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
    go mod tidy
    align
  fi
  local ldf="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${MINOR} -X ${pkg}.gitTreeState=clean"
  done
  for b in "${missing[@]}"; do
    case "$b" in
      etcd) continue ;;
    esac
    local hint=""
    [ "$b" = kube-apiserver ] && hint=" (cold: about 8-11 min on 2 cores, once)"
    [ "$b" = kubelet ] && hint=" (cold: about 6 min on 2 idle cores, 30s after the apiserver; once)"
    log "building ${b} ${KUBE_VERSION}${hint}"
    local t0=$SECONDS
    go build -ldflags "${ldf}" -o "${OUT}/${b}.tmp" "k8s.io/kubernetes/cmd/${b}"
    mv "${OUT}/${b}.tmp" "${OUT}/${b}"
    log "built ${b} in $((SECONDS - t0))s"
  done
}

build_etcd() {
  local dir="${WORK}/etcd-${ETCD_VERSION}"
  mkdir -p "${dir}"
  cd "${dir}"
  if [ ! -s go.sum ]; then
    printf 'module eraser.local/etcd\n\ngo 1.26\n' > go.mod
    cat > main.go <<'GO'
// Command etcd is etcd's own server entry point, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
    go mod tidy
    align
  fi
  log "building etcd ${ETCD_VERSION}"
  local t0=$SECONDS
  go build -ldflags "-s -w" -o "${OUT}/etcd.tmp" .
  mv "${OUT}/etcd.tmp" "${OUT}/etcd"
  log "built etcd in $((SECONDS - t0))s"
}

for b in "${missing[@]}"; do
  if [ "$b" = etcd ]; then (build_etcd); fi
done
if [ ${#missing[@]} -gt 1 ] || [ "${missing[0]}" != etcd ]; then (build_kube); fi

echo "${OUT}"
