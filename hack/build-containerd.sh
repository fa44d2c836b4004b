#!/usr/bin/env bash
# Builds a containerd release other than Debian's (containerd and
# containerd-shim-runc-v2) from its source on the Go module proxy into a
# cache directory keyed by version, once, so that the worker tier also runs
# on containerd 1.7 and 2.x (internal/testing/testcontainerd runs it when
# CONTAINERD_BIN_DIR names the directory): Debian ships 1.6 only, and no
# prebuilt containerd can be downloaded where this project is tested.
# Prints the directory holding the binaries on stdout; logs go to stderr.
#
#   hack/build-containerd.sh                          # v2.3.3: print .../containerd-v2.3.3/bin
#   CONTAINERD_VERSION=v1.7.29 hack/build-containerd.sh
#
# Environment: ERASER_CACHE (default ~/.cache/eraser), CONTAINERD_VERSION.
# Cold: about 1 min per version on 2 cores (Go build cache warm from the
# scanner's build, which shares most dependencies), a few minutes fully cold;
# warm: instant. See docs/runtimes.md.
set -euo pipefail

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.3.3}
CACHE=${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}
OUT="${CACHE}/containerd-${CONTAINERD_VERSION}"
BIN="${OUT}/bin"

log() { echo "[containerd] $*" >&2; }
# shellcheck source=hack/lock.sh
. "$(dirname "$0")/lock.sh"

built() { [ -x "${BIN}/containerd" ] && [ -x "${BIN}/containerd-shim-runc-v2" ]; }
if built; then
  echo "${BIN}"
  exit 0
fi
lock "containerd-${CONTAINERD_VERSION}"
if built; then
  echo "${BIN}"
  exit 0
fi

case "${CONTAINERD_VERSION}" in
  v2.*) module=github.com/containerd/containerd/v2 ;;
  v1.*) module=github.com/containerd/containerd ;;
  *) log "CONTAINERD_VERSION ${CONTAINERD_VERSION}: want v1.x or v2.x"; exit 1 ;;
esac

export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
log "fetching ${module}@${CONTAINERD_VERSION} from the module proxy"
src=$(go mod download -json "${module}@${CONTAINERD_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "${src}" ] || [ ! -d "${src}" ]; then
  log "go mod download gave no source directory for ${module} ${CONTAINERD_VERSION}"
  exit 1
fi

mkdir -p "${BIN}"
work=$(mktemp -d "${OUT}/src.XXXXXX")
trap 'chmod -R u+w "${work}" 2>/dev/null; rm -rf "${work}"' EXIT
cp -r "${src}/." "${work}/"
chmod -R u+w "${work}"
# 1.7's module keeps a vendor/modules.txt but no vendored sources (the
# module zip leaves them out): build from the module cache instead.
rm -rf "${work}/vendor"

# The tags drop the snapshotters that need C headers (btrfs) or are not used
# here (devmapper, zfs, aufs); the tests use overlayfs.
log "building containerd ${CONTAINERD_VERSION} (cold: about 1-3 min on 2 cores, once)"
t0=$SECONDS
(cd "${work}" && CGO_ENABLED=0 go build -mod=mod -trimpath -tags "no_btrfs no_devmapper no_zfs no_aufs" -ldflags "-s -w" \
  -o "${OUT}/tmp/" ./cmd/containerd ./cmd/containerd-shim-runc-v2) >&2
mv "${OUT}/tmp/containerd" "${OUT}/tmp/containerd-shim-runc-v2" "${BIN}/"
rmdir "${OUT}/tmp"
log "built containerd ${CONTAINERD_VERSION} in $((SECONDS - t0))s"
echo "${BIN}"
