#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok) from the Go modules pinned in hack/cluster/{kube,kwok}/go.mod into $CLUSTER_BIN.
#
# A binary is rebuilt only when it is missing or when the go.mod/go.sum it comes from changed
# (a stamp file records their digest), so later runs cost nothing. Each binary is built on its
# own, through hack/progress.sh, so that a first build (minutes per binary on 2 cores) says what
# it is doing; the Go build cache makes rebuilds much faster.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${CLUSTER_BIN:-$root/bin/cluster}
mkdir -p "$bin"
set -a; . "$root/hack/toolchain.env"; set +a

# build_module DIR LDFLAGS PKG=ESTIMATE... : go build each PKG of the module in DIR, one after
# the other (ESTIMATE: what its first build takes), unless its binary exists and the stamp
# (go.mod, go.sum and the ldflags) matches.
build_module() {
  local dir=$1 ldflags=$2; shift 2
  local stamp="$bin/.stamp-$(basename "$dir")"
  local want; want=$( (cat "$dir/go.mod" "$dir/go.sum"; [ -z "$ldflags" ] || echo "$ldflags") | sha256sum | cut -d' ' -f1)
  local missing=0 spec pkg
  for spec in "$@"; do pkg=${spec%=*}; [ -x "$bin/$(basename "$pkg")" ] || missing=1; done
  if [ "$missing" = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "cluster: building the control plane from $dir/go.mod into $bin" >&2
  local i=0
  for spec in "$@"; do
    i=$((i + 1))
    pkg=${spec%=*}
    (cd "$dir" && "$root/hack/progress.sh" "control plane $i/$#: $(basename "$pkg")" "${spec##*=}" go build -ldflags "$ldflags" -o "$bin/" "$pkg")
  done
  echo "$want" > "$stamp"
}

# A release build stamps the Kubernetes version into the binaries; without it the apiserver
# reports v0.0.0-master, which charts' kubeVersion constraints and semverCompare checks refuse.
kube_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/kube/go.mod")
kube_minor=$(echo "$kube_version" | cut -d. -f2)
version_pkg=k8s.io/component-base/version
kube_ldflags="-X $version_pkg.gitVersion=$kube_version -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$kube_minor -X $version_pkg.gitTreeState=clean"

build_module "$here/kube" "$kube_ldflags" ./etcd=2m \
  k8s.io/kubernetes/cmd/kube-apiserver=5m \
  k8s.io/kubernetes/cmd/kube-controller-manager=3m \
  k8s.io/kubernetes/cmd/kube-scheduler=1m
build_module "$here/kwok" "" sigs.k8s.io/kwok/cmd/kwok=2m

# envtest looks for etcd, kube-apiserver and kubectl in one folder (KUBEBUILDER_ASSETS).
kubectl_path=$(command -v kubectl || true)
if [ -z "$kubectl_path" ]; then
  echo "cluster: kubectl not found on PATH; install it (Debian: kubectl is expected at /usr/bin/kubectl)" >&2
  exit 1
fi
ln -sf "$kubectl_path" "$bin/kubectl"
