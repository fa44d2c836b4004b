#!/usr/bin/env bash
# Builds promtool (Prometheus' rule checker and rule unit-test runner) from
# the Go module proxy (no prebuilt downloads here) for the alert rules' unit
# tests (hack/render/promrules, make test-promrules). Cached by version;
# prints the binary's path. CHECK_ONLY=1: print it if built, else exit 1.
#
# The version is pinned here, as the control plane's and KWOK's are in their
# scripts: `go install pkg@version` builds promtool with the dependency
# versions of Prometheus' own go.mod, and requiring Prometheus from
# hack/tools or hack/render would instead merge its large module graph
# into controller-gen's or Helm's builds.
set -euo pipefail

PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
# remove_all_sd: Prometheus' own build tag that leaves out every service
# discovery (AWS, Azure, GCE, Kubernetes, ... SDKs), which rule checks and
# rule unit tests never use: most of what promtool would compile.
PROMTOOL_TAGS=remove_all_sd
dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/promtool-${PROMTOOL_VERSION}-${PROMTOOL_TAGS}"
bin="$dir/promtool"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
[[ ${CHECK_ONLY:-0} == 1 ]] && exit 1
# shellcheck source=hack/lock.sh
. "$(dirname "$0")/lock.sh"
lock "promtool-${PROMTOOL_VERSION}"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
echo "building promtool ${PROMTOOL_VERSION} from the module proxy into $dir (about 2 min cold on 2 idle cores)..." >&2
start=$SECONDS
rm -rf "$dir.tmp"
# promtool --version reports what the ldflags stamp (Prometheus' module
# version v0.X.Y is its release 3.X.Y).
GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$dir.tmp" \
	go install -trimpath -tags "${PROMTOOL_TAGS}" -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMTOOL_VERSION#v}" \
	"github.com/prometheus/prometheus/cmd/promtool@${PROMTOOL_VERSION}" >&2
mv "$dir.tmp/promtool" "$bin"
rmdir "$dir.tmp"
echo "built promtool in $((SECONDS - start)) s" >&2
echo "$bin"
