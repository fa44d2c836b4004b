#!/usr/bin/env bash
# Manual end-to-end check on a cluster with a real Windows node (no Windows
# CI exists). It deploys nothing itself: install Eraser first (Helm or
# manifests), with images that carry windows/amd64 workers. Then:
#
#   hack/windows-e2e.sh [IMAGE_TO_REMOVE]
#
# It points the manager at Windows nodes only, seeds an unused image on one
# Windows node, applies an ImageList for it, and checks the worker pod the
# manager emitted (HostProcess, SYSTEM, host network, no CRI mount, Windows
# paths, explicit command) and the remover's result on that node. It restores
# the configuration and removes what it created on exit.
set -euo pipefail
IMAGE=${1:-mcr.microsoft.com/windows/nanoserver:ltsc2022}
NS=${ERASER_NAMESPACE:-eraser-system}
CM=${ERASER_CONFIGMAP:-eraser-manager-config}
KEY=controller_manager_config.yaml
k() { kubectl "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { printf '\n== %s\n' "$*"; }

node=$(k get nodes -l kubernetes.io/os=windows -o jsonpath='{.items[0].metadata.name}')
[ -n "$node" ] || fail "no node labelled kubernetes.io/os=windows"
echo "Windows node: $node ($(k get node "$node" -o jsonpath='{.status.nodeInfo.osImage} {.status.nodeInfo.containerRuntimeVersion}'))"

backup=$(mktemp)
k -n "$NS" get configmap "$CM" -o jsonpath="{.data.${KEY//./\\.}}" >"$backup"
cleanup() {
  k delete imagelist eraser-windows-e2e --ignore-not-found >/dev/null
  k -n default delete pod eraser-windows-seed --ignore-not-found --wait=false >/dev/null
  k -n "$NS" create configmap "$CM" --from-file="$KEY=$backup" --dry-run=client -o yaml | k apply -f - >/dev/null
  rm -f "$backup"
}
trap cleanup EXIT

step "Windows-only node filter"
filtered=$(mktemp)
python3 - "$backup" "$filtered" <<'PY'
import sys, re
src = open(sys.argv[1]).read()
# Replace (or add) manager.nodeFilter with include kubernetes.io/os=windows.
block = "  nodeFilter:\n    type: include\n    selectors:\n      - kubernetes.io/os=windows\n"
lines = src.splitlines(keepends=True)
out, skip = [], False
for l in lines:
    if re.match(r"^  nodeFilter:", l):
        skip = True
        out.append(block)
        continue
    if skip and re.match(r"^    ", l):
        continue
    skip = False
    out.append(l)
text = "".join(out)
if "nodeFilter:" not in text:
    text = text.replace("manager:\n", "manager:\n" + block, 1)
open(sys.argv[2], "w").write(text)
PY
k -n "$NS" create configmap "$CM" --from-file="$KEY=$filtered" --dry-run=client -o yaml | k apply -f - >/dev/null
rm -f "$filtered"
sleep 5

step "Seeding $IMAGE on $node"
k -n default run eraser-windows-seed --image="$IMAGE" --restart=Never \
  --overrides="{\"spec\":{\"nodeName\":\"$node\",\"tolerations\":[{\"operator\":\"Exists\"}],\"nodeSelector\":{\"kubernetes.io/os\":\"windows\"}}}" \
  --command -- cmd /c echo seeded >/dev/null
k -n default wait pod/eraser-windows-seed --for=jsonpath='{.status.phase}'=Succeeded --timeout=30m >/dev/null
k -n default delete pod eraser-windows-seed --wait=true >/dev/null
echo "waiting 60s for the runtime to reclaim the exited container (an image still referenced is kept as in use)"
sleep 60

step "ImageList"
k apply -f - <<YAML
apiVersion: eraser.sh/v1
kind: ImageList
metadata: {name: eraser-windows-e2e}
spec: {images: ["$IMAGE"]}
YAML
pod=""
for _ in $(seq 120); do
  pod=$(k -n "$NS" get pods -l eraser.sh/type=manual --field-selector spec.nodeName="$node" -o name 2>/dev/null | head -1)
  [ -n "$pod" ] && break
  sleep 5
done
[ -n "$pod" ] || fail "no worker pod on $node"

step "Emitted pod: $pod"
j() { k -n "$NS" get "$pod" -o jsonpath="$1"; }
check() { [ "$2" = "$3" ] && echo "  ok   $1 = $2" || fail "$1 = '$2', want '$3'"; }
check hostNetwork "$(j '{.spec.hostNetwork}')" true
check os.name "$(j '{.spec.os.name}')" windows
check hostProcess "$(j '{.spec.securityContext.windowsOptions.hostProcess}')" true
check runAsUserName "$(j '{.spec.securityContext.windowsOptions.runAsUserName}')" 'NT AUTHORITY\SYSTEM'
check "CRI hostPath volumes" "$(j '{.spec.volumes[?(@.hostPath)].name}')" ""
echo "  info command = $(j '{.spec.containers[0].command}')  (empty: the image's entrypoint)"
echo "  info args    = $(j '{.spec.containers[0].args}')"
case "$(j '{.spec.containers[0].args}')" in *'C:\\run\\eraser.sh\\imagelist\\images'*) echo "  ok   Windows image-list path" ;; *) fail "no Windows image-list path in args" ;; esac

step "Remover result"
k -n "$NS" wait "$pod" --for=jsonpath='{.status.phase}'=Succeeded --timeout=30m >/dev/null || fail "pod did not succeed: $(j '{.status}')"
summary=$(j '{.status.containerStatuses[0].state.terminated.message}')
echo "  summary: $summary"
case "$summary" in *'"removed":1'*) echo "RESULT: PASS" ;; *) fail "the image was not removed" ;; esac
