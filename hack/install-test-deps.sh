#!/usr/bin/env bash
# Installs the host packages the test tiers run for real: containerd and runc
# (Debian's), and the CNI plugins the kubelet tier's pod network uses. Idempotent; apt is only touched when something is missing.
# The packages install a systemd unit that is never started here: the tests
# start their own private containerd.
set -euo pipefail

need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "install-test-deps: need root to install ${need[*]}" >&2
  exit 1
fi
echo "install-test-deps: installing ${need[*]}" >&2
# shellcheck source=hack/lock.sh
. "$(dirname "$0")/lock.sh"
apt_install "${need[@]}"
