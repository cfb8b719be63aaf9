#!/usr/bin/env bash
# Runs helm-operator-plugins' own test suite, at the version go.mod pins, with every module it
# requires at the version this operator links (Helm, k8s.io, controller-runtime...), against the
# local control plane: the operator runs the plugins at versions their release was not tested
# with. Usage: hack/deps/plugins-test.sh CONTROL_PLANE_DIR (bin/cluster).
set -euo pipefail
cd "$(dirname "$0")/../.."
assets=$(cd "${1:?usage: $0 CONTROL_PLANE_DIR}" && pwd)
src=$(go list -m -f '{{.Dir}}' github.com/operator-framework/helm-operator-plugins)
go_version=$(awk '$1 == "go" { print $2 }' go.mod)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go list -m -f '{{.Path}} {{.Version}}' all >"$work/ours"
cp -r "$src" "$work/plugins"
chmod -R u+w "$work/plugins"
cd "$work/plugins"
args=("-go=$go_version")
while read -r path version; do
  ours=$(awk -v p="$path" '$1 == p { print $2 }' "$work/ours")
  if [[ -n "$ours" && "$ours" != "$version" ]]; then
    args+=("-require=$path@$ours")
  fi
done < <(awk '/^require \(/ { in_block = 1; next } in_block && /^\)/ { in_block = 0 } in_block && NF >= 2 { print $1, $2 }' go.mod)
go mod edit "${args[@]}"
go mod tidy
echo "helm-operator-plugins $(basename "$src" | sed 's/.*@//') with: $(go list -m -f '{{.Path}}@{{.Version}}' helm.sh/helm/v3 k8s.io/client-go sigs.k8s.io/controller-runtime | tr '\n' ' ')"
KUBEBUILDER_ASSETS="$assets" go test -count=1 -timeout 30m ./...
