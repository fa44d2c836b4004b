#!/usr/bin/env bash
# Builds the Trivy CLI from the Go module proxy (no prebuilt downloads here)
# for the scanner benchmark, which compares our scanner with it. Cached by
# version; prints the binary's path. Cold: ~9 min on 2 cores.
set -euo pipefail

TRIVY_VERSION=${TRIVY_VERSION:-v0.74.0}
dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/trivy-${TRIVY_VERSION}"
bin="$dir/trivy"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
echo "building the Trivy CLI ${TRIVY_VERSION} from the module proxy into $dir (about 9 min cold)..." >&2
start=$SECONDS
# Trivy imports encoding/json/v2, which Go 1.26 has only behind this flag.
GOTOOLCHAIN=local CGO_ENABLED=0 GOEXPERIMENT=jsonv2 GOFLAGS=-buildvcs=false GOBIN="$dir.tmp" \
	go install -trimpath -ldflags "-s -w -X github.com/aquasecurity/trivy/pkg/version/app.ver=${TRIVY_VERSION#v}" \
	"github.com/aquasecurity/trivy/cmd/trivy@${TRIVY_VERSION}" >&2
mv "$dir.tmp/trivy" "$bin"
rmdir "$dir.tmp"
echo "built the Trivy CLI in $((SECONDS - start)) s" >&2
echo "$bin"
