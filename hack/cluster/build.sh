#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok) from the Go modules pinned in hack/cluster/{kube,kwok}/go.mod into $CLUSTER_BIN.
#
# A binary is rebuilt only when it is missing or when the go.mod/go.sum it comes from changed
# (a stamp file records their digest), so later runs cost nothing. The first build takes about
# 10 minutes on 2 cores; the Go build cache makes rebuilds much faster.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${CLUSTER_BIN:-$root/bin/cluster}
mkdir -p "$bin"

# build_module DIR PKG... : go build each PKG of the module in DIR unless its stamp matches.
build_module() {
  local dir=$1; shift
  local stamp="$bin/.stamp-$(basename "$dir")"
  local want; want=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -d' ' -f1)
  local missing=0 pkg
  for pkg in "$@"; do [ -x "$bin/$(basename "$pkg")" ] || missing=1; done
  if [ "$missing" = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "cluster: building $* (first build takes minutes)" >&2
  local start=$SECONDS
  (cd "$dir" && go build -o "$bin/" "$@")
  echo "$want" > "$stamp"
  echo "cluster: built in $((SECONDS - start))s" >&2
}

build_module "$here/kube" ./etcd \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler
build_module "$here/kwok" sigs.k8s.io/kwok/cmd/kwok

# envtest looks for etcd, kube-apiserver and kubectl in one folder (KUBEBUILDER_ASSETS).
kubectl_path=$(command -v kubectl || true)
if [ -z "$kubectl_path" ]; then
  echo "cluster: kubectl not found on PATH; install it (Debian: kubectl is expected at /usr/bin/kubectl)" >&2
  exit 1
fi
ln -sf "$kubectl_path" "$bin/kubectl"
