#!/usr/bin/env bash
# make demo: one command from a fresh clone to running proxies.
# Starts the local cluster (with its image registry) unless KUBECONFIG points at one, installs the
# CRD, runs the operator, applies config/samples (with a self-signed certificate for the TLS
# sample), waits until the first sample is Deployed and its Deployment Available, prints what
# runs, and keeps the operator running until Ctrl-C, which stops what the demo started.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
: "${HELM:=bin/helm}" "${KUSTOMIZE:=bin/kustomize}" "${OPERATOR:=bin/myproxy-operator}"
state=bin/demo
mkdir -p "$state"

started_cluster=0
if [ -z "${KUBECONFIG:-}" ]; then
  echo "demo: waiting for the local cluster (built from Go modules on first use: each component says how far it is)"
  export CLUSTER_REGISTRY=1
  hack/cluster/cluster.sh status || { hack/cluster/cluster.sh up; started_cluster=1; }
  eval "$(hack/cluster/cluster.sh env)"
fi
export KUBECONFIG

operator_pid=
cleanup() {
  echo
  if [ -n "$operator_pid" ]; then
    echo "demo: stopping the operator"
    kill -TERM "$operator_pid" 2>/dev/null || true
    wait "$operator_pid" 2>/dev/null || true
  fi
  if [ "$started_cluster" = 1 ]; then
    echo "demo: stopping the local cluster"
    hack/cluster/cluster.sh down
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "demo: installing the MyProxy CRD and waiting until the apiserver serves it"
"$KUSTOMIZE" build config/crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl wait --for=condition=Established crd/myproxies.gateway.example.com --timeout=30s >/dev/null

echo "demo: starting the operator (log: $state/operator.log)"
"$OPERATOR" --watches-file=watches.yaml --metrics-bind-address=0 --health-probe-bind-address=0 \
  >"$state/operator.log" 2>&1 &
operator_pid=$!

# The TLS sample needs a kubernetes.io/tls Secret.
if ! kubectl get secret myproxy-tls-cert >/dev/null 2>&1; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=myproxy-tls.default.svc" \
    -keyout "$state/tls.key" -out "$state/tls.crt" 2>/dev/null
  kubectl create secret tls myproxy-tls-cert --cert="$state/tls.crt" --key="$state/tls.key" >/dev/null
fi

echo "demo: applying config/samples"
"$KUSTOMIZE" build config/samples | kubectl apply -f -
sample=$(kubectl get -f config/samples/gateway_v1alpha1_myproxy.yaml -o jsonpath='{.metadata.name}')
echo "demo: waiting for myproxy/$sample to be Deployed (the operator installs its Helm release)"
kubectl wait --for=condition=Deployed "myproxy/$sample" --timeout=180s
echo "demo: waiting for its proxy Pods to be ready (condition Available)"
kubectl wait --for=condition=Available "myproxy/$sample" --timeout=180s

echo
kubectl get myproxies,deployments,services
cat <<EOF

The operator runs until Ctrl-C. In another terminal:
  export KUBECONFIG=$KUBECONFIG
  kubectl get myproxies
  kubectl scale myproxy/$sample --replicas=3
  kubectl patch myproxy/$sample --type=merge -p '{"spec":{"image":"docker.io/nginxinc/nginx-unprivileged:1.27.4"}}'
  kubectl describe myproxy/$sample     # Events: Installed, Upgraded...
EOF
if [ -n "${REGISTRY:-}" ]; then
  cat <<EOF
The cluster's registry takes the operator's image, built without a container engine:
  export REGISTRY=$REGISTRY REGISTRY_CA=$REGISTRY_CA
  make image-push IMG=\$REGISTRY/myproxy-operator:dev     # prints the image by digest, for make deploy IMG=...
EOF
fi
wait "$operator_pid"
