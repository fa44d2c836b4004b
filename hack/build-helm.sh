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
# The directory names the build recipe too ("-k8s": Helm 3 stamped with the
# Kubernetes version it was built against), so that a binary cached by an
# older recipe is rebuilt rather than reused.
dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/helm-${HELM_VERSION}-k8s"
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
ldflags="-s -w -X ${module}/internal/version.version=${HELM_VERSION}"
if [[ $major == 3 ]]; then
	# Helm 3's default capabilities (helm template, helm lint, --dry-run=client)
	# are the Kubernetes version its release Makefile stamps, from the
	# k8s.io/client-go it builds with (v0.N is Kubernetes 1.N); unstamped
	# they say v1.20.0, under every chart's kubeVersion. Helm 4 reads the
	# version from the binary's build info, which go install records.
	gomod=$(GOTOOLCHAIN=local go mod download -json "${module}@${HELM_VERSION}" |
		awk -F'"' '$2 == "GoMod" {print $4; exit}')
	clientgo=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")
	[[ $clientgo =~ ^v0\.([0-9]+)\. ]] || { echo "build-helm: no k8s.io/client-go v0.N in $gomod" >&2; exit 1; }
	minor=${BASH_REMATCH[1]}
	for pkg in pkg/chartutil pkg/lint/rules; do
		ldflags+=" -X ${module}/${pkg}.k8sVersionMajor=1 -X ${module}/${pkg}.k8sVersionMinor=${minor}"
	done
fi
GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$dir.tmp" \
	go install -trimpath -ldflags "$ldflags" "${module}/cmd/helm@${HELM_VERSION}" >&2
mv "$dir.tmp/helm" "$bin"
rmdir "$dir.tmp"
echo "built the Helm CLI in $((SECONDS - start)) s" >&2
echo "$bin"
