#!/usr/bin/env bash
# Builds the tools of make test's later tiers ahead of them, in the order
# the tiers need them, at a lower CPU priority: make test starts it in the
# background (hack/test-tiers.sh), so that the tools build while the first
# tiers wait on their API servers and runtimes, instead of each tier
# building its own while nothing else runs. Every script locks what it
# builds (hack/lock.sh): a tier asking for a tool still being built waits
# for it. A build that fails here fails again, with its error, in the tier
# that needs it.
set -uo pipefail
cd "$(dirname "$0")/.."
step() {
  local t0=$SECONDS
  if "$@" >/dev/null; then
    echo "prebuild: $* in $((SECONDS - t0)) s"
  else
    echo "prebuild: $* failed (the tier that needs it builds it again)"
  fi
}
# CRI-O and the kubelet come first: the worker tier and the kubelet tier
# (beside the others, after the fault tier) start at about the same time,
# and both need CRI-O; Helm 4 is the kubelet tier's too.
step hack/build-crio.sh
for v in ${CONTAINERD_VERSIONS:?the versions make test-containerd-versions runs}; do
  step env CONTAINERD_VERSION="$v" hack/build-containerd.sh
done
step env KUBELET=1 EXTRA=1 hack/build-control-plane.sh
step hack/build-helm.sh
step hack/build-promtool.sh
step env HELM_MAJOR=3 hack/build-helm.sh
step hack/build-cosign.sh
step hack/install-wine.sh
