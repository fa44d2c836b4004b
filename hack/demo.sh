#!/usr/bin/env bash
# The README's first command: builds what it needs (once, cached), starts a
# small real cluster on this machine (API server, controller manager,
# scheduler, and nodes that are real kubelets, each on its own containerd),
# installs Eraser from deploy/eraser.yaml with the manager running in the
# cluster, puts a few images on a node, removes some with an ImageList and
# shows the node's images before and after. Everything it starts is stopped,
# and every change to the machine undone, at the end or on Ctrl-C.
#
# Needs root. DEMO_KEEP=1 keeps the cluster up until Ctrl-C, to poke around.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false} GOTOOLCHAIN=${GOTOOLCHAIN:-local}
t_start=$SECONDS

if [ "$(id -u)" != 0 ]; then
  echo "demo: needs root: it runs containerd and kubelets, and makes network bridges" >&2
  exit 1
fi

state=${DEMO_STATE:-/tmp/eraser-demo}
work=$(mktemp -d -t eraser-demo.XXXXXX)
cluster_pid=""

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
indent() { sed 's/^/   /'; }
progress() { # progress MESSAGE PID: a ticking line while a slow step runs
  local msg=$1 pid=$2 t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    printf '\r   %s ... %ds ' "$msg" $((SECONDS - t0))
    sleep 2
  done
  printf '\r   %s ... done in %ds\n' "$msg" $((SECONDS - t0))
  wait "$pid"
}
sysctls() {
  echo "   vm.overcommit_memory=$(cat /proc/sys/vm/overcommit_memory) kernel.panic=$(cat /proc/sys/kernel/panic)" \
    "kernel.panic_on_oops=$(cat /proc/sys/kernel/panic_on_oops)"
}

cleanup() {
  local code=$?
  trap - EXIT INT TERM
  if [ -n "$cluster_pid" ]; then
    step "Tearing down: every process by its pid, the nodes' mounts and bridges, the sysctls the kubelets changed"
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
    grep -E 'restored|stopped and removed|leftover|error' "$work/cluster.log" | sed 's/^\[kubecluster [0-9:.]*\] //' | indent || true
    sysctls
  fi
  case $code in
    0 | 130) rm -rf "$work" ;;
    *) echo "demo: failed; its logs are kept in $work" ;;
  esac
  [ "$code" = 130 ] && echo "demo: interrupted"
  echo "demo: finished in $((SECONDS - t_start))s"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "Building what the cluster runs (each piece is cached after the first run)"
hack/install-test-deps.sh
KUBELET=1 EXTRA=1 hack/build-control-plane.sh >"$work/assets" 2>"$work/build.log" &
progress "kube-apiserver, controller manager, scheduler, kubelet, etcd (first run 15-25 min; log: $work/build.log)" $! ||
  { cat "$work/build.log"; exit 1; }
assets=$(cat "$work/assets")
make --no-print-directory images IMAGES="manager collector remover" PLATFORMS=linux/amd64 >"$work/images.log" 2>&1 &
progress "Eraser's images: manager, collector, remover (make images)" $! || { cat "$work/images.log"; exit 1; }
(go build -o "$work/kubecluster" ./hack/kubecluster && CGO_ENABLED=0 go build -o "$work/eraser" ./cmd/eraser &&
  mkdir -p "$work/plugins" && go build -o "$work/plugins/kubectl-eraser" ./cmd/kubectl-eraser) >"$work/go.log" 2>&1 &
progress "hack/kubecluster, the eraser CLI and the kubectl eraser plugin" $! || { cat "$work/go.log"; exit 1; }
kubectl() { "$assets/kubectl" --kubeconfig "$state/admin.kubeconfig" "$@"; }

nodes=2
avail_kb=$(awk '/^MemAvailable:/{print $2}' /proc/meminfo)
[ "${avail_kb:-0}" -gt $((3 << 20)) ] || nodes=1
step "Starting a local cluster with $nodes node(s)"
"$work/kubecluster" up -state "$state" -nodes "$nodes" -assets "$assets" >"$work/cluster.out" 2>"$work/cluster.log" &
cluster_pid=$!
t0=$SECONDS
until grep -q '^cluster ready' "$work/cluster.out" 2>/dev/null; do
  kill -0 "$cluster_pid" 2>/dev/null || { cluster_pid=""; cat "$work/cluster.log"; exit 1; }
  [ $((SECONDS - t0)) -lt 300 ] || { echo "demo: the cluster was not ready after 5 minutes" >&2; exit 1; }
  sleep 0.5
done
grep -E 'ready' "$work/cluster.log" | sed 's/^\[kubecluster [0-9:.]*\] //' | indent
echo "   every node's containerd is at /run/containerd/containerd.sock in the node's own mount namespace"
echo "   (Eraser's default runtime address); from here node-1's is $state/node-1/run/containerd.sock"
echo
kubectl get nodes -o wide | indent

step "Loading Eraser's images into every node (there is no registry)"
for sock in "$state"/node-*/run/containerd.sock; do
  node=$(basename "$(dirname "$(dirname "$sock")")")
  for img in manager collector remover; do
    ctr --address "$sock" --namespace k8s.io images import "bin/images/${img}_linux_amd64.tar" >/dev/null
  done
  echo "   $node: $("$work/eraser" node list --runtime-endpoint "unix://$sock" | grep -c eraser-oss) Eraser images"
done

step "Installing Eraser from deploy/eraser.yaml (scheduled runs off for this demo)"
mkdir -p "$work/install"
cp deploy/eraser.yaml "$work/install/"
cat >"$work/install/kustomization.yaml" <<'YAML'
resources: [eraser.yaml]
patches:
- target: {kind: ConfigMap, name: eraser-manager-config}
  patch: |-
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: eraser-manager-config}
    data:
      controller_manager_config.yaml: |
        apiVersion: eraser.sh/v1alpha3
        kind: EraserConfig
        manager:
          runtime:
            name: containerd
            address: unix:///run/containerd/containerd.sock
          imageJob:
            cleanup:
              delayOnSuccess: 10m   # keep the finished ImageJob around to look at
        components:
          collector:
            enabled: false          # no scheduled runs: only ImageLists remove images here
          scanner:
            enabled: false
YAML
kubectl apply -k "$work/install" | indent
kubectl -n eraser-system rollout status deployment/eraser-controller-manager --timeout=180s | indent
kubectl -n eraser-system get pods -o wide | indent
echo "   (the manager reaches the API server through the kubernetes Service, from its pod)"

step "Putting images on node-1, and running a pod from one of them"
"$work/kubecluster" seed -state "$state" -node node-1 \
  example.com/demo/old-app:1.0 example.com/demo/old-app:1.1 example.com/demo/web:2.4
kubectl run web --image=example.com/demo/web:2.4 --image-pull-policy=Never \
  --overrides='{"apiVersion":"v1","spec":{"nodeName":"node-1","automountServiceAccountToken":false}}' | indent
kubectl wait --for=condition=Ready pod/web --timeout=120s | indent
node1="unix://$state/node-1/run/containerd.sock"

step "node-1's images before (eraser node list, straight from the node's runtime)"
"$work/eraser" node list --runtime-endpoint "$node1" | indent

step "Applying an ImageList: remove old-app:1.0 and web:2.4 from every node"
kubectl apply -f - <<'YAML' | indent
apiVersion: eraser.sh/v1
kind: ImageList
metadata:
  name: imagelist
spec:
  images:
    - example.com/demo/old-app:1.0
    - example.com/demo/web:2.4
YAML
sleep 1
kubectl get imagelist,imagejob | indent
kubectl -n eraser-system get pods -l eraser.sh/type=manual -o wide | indent
kubectl wait --for=condition=Ready imagelist/imagelist --timeout=180s | indent
echo
kubectl get imagelist,imagejob -o wide | indent
echo
echo "   results: $(kubectl get imagelist imagelist -o jsonpath='{.status.results}')"

step "node-1's images after: old-app:1.0 is gone; web:2.4 stays, a container uses it; old-app:1.1 was not listed"
"$work/eraser" node list --runtime-endpoint "$node1" | indent

step "The run's per-node report, kept after its pods are gone (kubectl eraser report)"
for _ in $(seq 60); do
  [ "$(kubectl get imagejob -o jsonpath='{.items[0].status.report.complete}')" = true ] && break
  sleep 1
done
# kubectl takes no flags before a plugin's name: the kubeconfig goes by KUBECONFIG.
PATH="$work/plugins:$PATH" KUBECONFIG="$state/admin.kubeconfig" "$assets/kubectl" eraser report imagelist/imagelist | indent

step "A bad ImageList is refused by the API server, naming the field"
kubectl apply -f - <<'YAML' 2>&1 | indent || true
apiVersion: eraser.sh/v1
kind: ImageList
metadata: {name: broken}
spec: {images: ["nginx", ""]}
YAML

if [ "${DEMO_KEEP:-0}" = 1 ]; then
  step "The cluster stays up until Ctrl-C"
  echo "   kubectl: $assets/kubectl --kubeconfig $state/admin.kubeconfig"
  echo "   the quick start (docs/quickstart.md), in another shell:"
  echo "     export KUBECONFIG=$state/admin.kubeconfig PATH=$work/plugins:$assets:\$PATH"
  echo "     kubectl eraser status"
  echo "   node sockets: $state/node-*/run/containerd.sock"
  wait "$cluster_pid" || true
fi
