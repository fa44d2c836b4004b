#!/usr/bin/env bash
# Builds CRI-O (crio and pinns) from its source on the Go module proxy into a
# cache directory keyed by version, once, for internal/testing/testcrio: no prebuilt
# CRI-O can be downloaded where this project is tested, and Debian has no
# CRI-O package. Installs Debian's conmon, which CRI-O runs per container.
# Prints the directory holding the binaries on stdout; logs go to stderr.
#
#   hack/build-crio.sh                # build if needed, print .../crio-v1.34.0/bin
#   CHECK_ONLY=1 hack/build-crio.sh   # print the directory if built, else exit 1
#
# Environment: ERASER_CACHE (default ~/.cache/eraser), CRIO_VERSION.
# Cold: about 5 min on 2 cores shared with other builds; warm: instant. See docs/dev/crio.md.
set -euo pipefail

CRIO_VERSION=${CRIO_VERSION:-v1.34.0}
CACHE=${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}
OUT="${CACHE}/crio-${CRIO_VERSION}"
BIN="${OUT}/bin"

log() { echo "[crio] $*" >&2; }
# shellcheck source=hack/lock.sh
. "$(dirname "$0")/lock.sh"

built() { [ -x "${BIN}/crio" ] && [ -x "${BIN}/pinns" ]; }

if [ "${CHECK_ONLY:-0}" = 1 ]; then
  built && command -v conmon >/dev/null && echo "${BIN}" && exit 0
  exit 1
fi

# conmon and runc are the only runtime dependencies outside the cache: Debian's
# builds work with CRI-O 1.34 (cgroupfs manager, no systemd needed).
need=()
command -v conmon >/dev/null || need+=(conmon)
command -v runc >/dev/null || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "need root to install ${need[*]}"
    exit 1
  fi
  log "installing ${need[*]}"
  apt_install "${need[@]}"
fi

lock "crio-${CRIO_VERSION}"
if built; then
  echo "${BIN}"
  exit 0
fi

export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
log "fetching github.com/cri-o/cri-o@${CRIO_VERSION} from the module proxy"
src=$(go mod download -json "github.com/cri-o/cri-o@${CRIO_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "${src}" ] || [ ! -d "${src}" ]; then
  log "go mod download gave no source directory for cri-o ${CRIO_VERSION}"
  exit 1
fi

# The module cache is read-only and pinns' Makefile writes next to its sources.
mkdir -p "${BIN}"
work=$(mktemp -d "${OUT}/src.XXXXXX")
trap 'chmod -R u+w "${work}" 2>/dev/null; rm -rf "${work}"' EXIT
cp -r "${src}/." "${work}/"
chmod -R u+w "${work}"

if [ ! -x "${BIN}/crio" ]; then
  # These tags drop what would need C libraries Debian ships only as -dev
  # packages (gpgme, btrfs, devicemapper) and ostree. The tests need none of
  # it: images come from a plain HTTP registry, storage is overlay, and
  # without the seccomp tag CRI-O applies no seccomp profile.
  TAGS="containers_image_ostree_stub containers_image_openpgp exclude_graphdriver_btrfs btrfs_noversion exclude_graphdriver_devicemapper"
  log "building crio ${CRIO_VERSION} (cold: about 5 min on 2 busy cores, once)"
  t0=$SECONDS
  (cd "${work}" && CGO_ENABLED=1 go build -trimpath -tags "${TAGS}" -ldflags "-s -w" -o "${BIN}/crio.tmp" ./cmd/crio) >&2
  mv "${BIN}/crio.tmp" "${BIN}/crio"
  log "built crio in $((SECONDS - t0))s"
fi

if [ ! -x "${BIN}/pinns" ]; then
  log "building pinns"
  t0=$SECONDS
  # The Makefile links statically and writes ../bin/pinns, beside the sources.
  make -s -C "${work}/pinns" >&2
  install -m 0755 "${work}/bin/pinns" "${BIN}/pinns"
  log "built pinns in $((SECONDS - t0))s"
fi

"${BIN}/crio" --version >&2 || true
echo "${BIN}"
