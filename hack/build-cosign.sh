#!/usr/bin/env bash
# Builds the cosign CLI from the Go module proxy (no prebuilt downloads
# here): the tool that verifies a release's signatures, SBOMs and
# provenance, as a user verifies them. Cached by version; prints the
# binary's path.
#
#   hack/build-cosign.sh                # COSIGN_VERSION, default below
#   CHECK_ONLY=1 hack/build-cosign.sh   # print the path if built, else exit 1
#
# cosign 2.x: its signatures and attestations are the tag-based ones
# (sha256-<digest>.sig / .att) that every cosign since 1.x verifies, and
# its verification with a key needs no network (--insecure-ignore-tlog).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
COSIGN_VERSION=${COSIGN_VERSION:-v2.6.5}
module="github.com/sigstore/cosign/v2"
dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/cosign-${COSIGN_VERSION}"
bin="$dir/cosign"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
[[ ${CHECK_ONLY:-0} == 1 ]] && exit 1
# shellcheck source=hack/lock.sh
. "$root/hack/lock.sh"
lock "cosign-${COSIGN_VERSION}"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
echo "building the cosign CLI ${COSIGN_VERSION} from the module proxy into $dir..." >&2
start=$SECONDS
rm -rf "$dir.tmp"
# cosign version reports what the ldflags stamp.
GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$dir.tmp" \
	go install -trimpath -ldflags "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=${COSIGN_VERSION}" \
	"${module}/cmd/cosign@${COSIGN_VERSION}" >&2
mv "$dir.tmp/cosign" "$bin"
rmdir "$dir.tmp"
echo "built the cosign CLI in $((SECONDS - start)) s" >&2
echo "$bin"
