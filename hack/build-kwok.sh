#!/usr/bin/env bash
# Builds KWOK (simulated nodes for the scale benchmark) from the Go module
# proxy into a cache directory keyed by version, once, and prints its path.
set -euo pipefail
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CACHE=${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}
OUT="${CACHE}/kwok-${KWOK_VERSION}"
if [ ! -x "${OUT}/kwok" ]; then
  echo "[kwok] building sigs.k8s.io/kwok ${KWOK_VERSION} (about 3 min, once)" >&2
  mkdir -p "${OUT}"
  GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="${OUT}" go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
fi
echo "${OUT}/kwok"
