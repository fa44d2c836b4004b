#!/usr/bin/env bash
# Builds the Helm CLI from the Go module proxy (no prebuilt downloads here)
# for the install tier, which drives real `helm install/upgrade/rollback/
# uninstall`. Cached by version; prints the binary's path. Cold: ~3 min on
# 2 cores.
#
#   hack/build-helm.sh                # Helm 4, the version hack/render's go.mod requires
#   HELM_MAJOR=3 hack/build-helm.sh   # Helm 3 (HELM3_VERSION), which most clusters are still run with
#   CHECK_ONLY=1 hack/build-helm.sh   # print the path if built, else exit 1
#
# Helm 4's version is the one hack/render's go.mod requires, so the SDK that
# renders the chart in the other tests and the CLI that installs it are the
# same Helm.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
major=${HELM_MAJOR:-4}
case "$major" in
4) HELM_VERSION=${HELM_VERSION:-$(awk '$1 == "helm.sh/helm/v4" {print $2; exit}' "$root/hack/render/go.mod")}
	[[ -n $HELM_VERSION ]] || { echo "build-helm: no helm.sh/helm/v4 in hack/render/go.mod" >&2; exit 1; } ;;
3) HELM_VERSION=${HELM3_VERSION:-v3.21.4} ;;
*) echo "build-helm: HELM_MAJOR is 3 or 4, not $major" >&2; exit 2 ;;
esac
module="helm.sh/helm/v${major}"
dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/helm-${HELM_VERSION}"
bin="$dir/helm"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
[[ ${CHECK_ONLY:-0} == 1 ]] && exit 1
# shellcheck source=hack/lock.sh
. "$root/hack/lock.sh"
lock "helm-${HELM_VERSION}"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
echo "building the Helm CLI ${HELM_VERSION} from the module proxy into $dir (about 3 min cold)..." >&2
start=$SECONDS
rm -rf "$dir.tmp"
# helm version reports what the ldflags stamp; unstamped it says v${major}-dev.
GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$dir.tmp" \
	go install -trimpath -ldflags "-s -w -X ${module}/internal/version.version=${HELM_VERSION}" \
	"${module}/cmd/helm@${HELM_VERSION}" >&2
mv "$dir.tmp/helm" "$bin"
rmdir "$dir.tmp"
echo "built the Helm CLI in $((SECONDS - start)) s" >&2
echo "$bin"
