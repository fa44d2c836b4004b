#!/usr/bin/env bash
# The README's first command: builds what it needs (once, cached), starts a
# local control plane and the Eraser manager, installs the CRDs, applies a
# sample ImageList and shows what the API server holds. Everything it starts
# is stopped on exit or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false} GOTOOLCHAIN=${GOTOOLCHAIN:-local}

work=$(mktemp -d -t eraser-demo.XXXXXX)
pids=()
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
  echo "demo: stopped everything it started"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
progress() { # progress MESSAGE PID: a ticking line while a slow step runs
  local msg=$1 pid=$2 t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    printf '\r   %s ... %ds ' "$msg" $((SECONDS - t0))
    sleep 2
  done
  printf '\r   %s ... done in %ds\n' "$msg" $((SECONDS - t0))
  wait "$pid"
}

step "Building kube-apiserver, etcd and kubectl from the Go module proxy (cached after the first run)"
hack/build-control-plane.sh >"$work/assets" 2>"$work/build.log" &
progress "control plane (first run about 10 minutes, log: $work/build.log)" $! || { cat "$work/build.log"; exit 1; }
assets=$(cat "$work/assets")
kubectl() { "$assets/kubectl" --kubeconfig "$work/kubeconfig" "$@"; }

step "Building the manager"
make --no-print-directory -s build >"$work/make.log" 2>&1 &
progress "bin/manager" $! || { cat "$work/make.log"; exit 1; }

step "Starting a local control plane with the Eraser CRDs"
go build -o "$work/localcluster" ./hack/localcluster
"$work/localcluster" -assets "$assets" -write-kubeconfig "$work/kubeconfig" >"$work/cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do
  grep -q "control plane ready" "$work/cluster.log" 2>/dev/null && break
  kill -0 "${pids[-1]}" 2>/dev/null || { cat "$work/cluster.log"; exit 1; }
  sleep 0.5
done
sed -n 's/^/   /p' "$work/cluster.log"
kubectl get crd -o custom-columns='CRD:.metadata.name,SCOPE:.spec.scope,VERSIONS:.spec.versions[*].name'

step "Registering a node (no kubelet runs here yet: its worker pods will stay Pending)"
kubectl apply -f - <<'YAML' | sed 's/^/   /'
apiVersion: v1
kind: Node
metadata:
  name: demo-node
  labels: {kubernetes.io/os: linux}
YAML

step "Starting the manager in namespace eraser-system"
kubectl create namespace eraser-system >/dev/null
kubectl -n eraser-system create configmap eraser-manager-config \
  --from-file=controller_manager_config.yaml=config/manager/controller_manager_config.yaml >/dev/null
POD_NAMESPACE=eraser-system bin/manager --kubeconfig "$work/kubeconfig" \
  --config config/manager/controller_manager_config.yaml \
  --health-probe-bind-address 127.0.0.1:18081 --metrics-bind-address 127.0.0.1:18889 \
  >"$work/manager.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do
  curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1 && break
  kill -0 "${pids[-1]}" 2>/dev/null || { cat "$work/manager.log"; exit 1; }
  sleep 0.5
done
echo "   /readyz: $(curl -fsS http://127.0.0.1:18081/readyz)   /healthz: $(curl -fsS http://127.0.0.1:18081/healthz)"
for _ in $(seq 60); do
  holder=$(kubectl -n eraser-system get lease eraser-manager.eraser.sh -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  [ -n "$holder" ] && break
  sleep 0.5
done
echo "   leader: ${holder:-none}"
echo "   metrics: $(curl -fsS http://127.0.0.1:18889/metrics | grep -c '^controller_runtime_') controller_runtime series on :18889"

step "Applying a sample ImageList (config/samples/eraser_v1_imagelist.yaml)"
kubectl apply -f config/samples/eraser_v1_imagelist.yaml

step "A bad ImageList is refused by the API server, naming the field"
kubectl apply -f - <<'YAML' 2>&1 | sed 's/^/   /' || true
apiVersion: eraser.sh/v1
kind: ImageList
metadata: {name: broken}
spec: {images: ["nginx", ""]}
YAML

step "The same ImageList through the deprecated eraser.sh/v1alpha1"
kubectl get imagelists.v1alpha1.eraser.sh imagelist -o yaml 2>&1 | sed -n '1,3p;/^spec:/,$p' | sed 's/^/   /'

step "What the API server holds"
sleep 2
kubectl get imagelists,imagejobs -o wide
echo
kubectl -n eraser-system get pods -o wide
echo
echo "   the ImageList's worker pod (first container):"
kubectl -n eraser-system get pods -l eraser.sh/type=manual \
  -o jsonpath='{range .items[*]}   node={.spec.nodeName} image={.spec.containers[0].image}{"\n"}   args={.spec.containers[0].args}{"\n"}{end}' 
echo
echo "demo: done. Manager log: $(wc -l <"$work/manager.log") lines; first lines:"
head -n 3 "$work/manager.log" | cut -c1-200 | sed 's/^/   /'
