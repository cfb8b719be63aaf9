#!/usr/bin/env bash
# make catalog: a file-based OLM catalog (catalog/myproxy-operator/) holding the bundle in
# bundle/, rendered from the bundle directory (no registry needed) and validated with opm.
#   catalog.sh OPM BUNDLE_IMG CHANNEL VERSION
set -euo pipefail
opm=$1 bundle_img=$2 channel=$3 version=$4
package=myproxy-operator
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/catalog/$package
cd "$root"
[ -f bundle/manifests/$package.clusterserviceversion.yaml ] || { echo "catalog: run make bundle first" >&2; exit 1; }

mkdir -p "$out"
{
  "$opm" init "$package" --default-channel="$channel" --description=README.md --output=yaml
  echo "---"
  # opm records the bundle's image; the directory stands in for it until the image is pushed.
  "$opm" render ./bundle --output=yaml | sed "s|^image: .*|image: $bundle_img|"
  echo "---"
  cat <<YAML
schema: olm.channel
package: $package
name: $channel
entries:
- name: $package.v$version
YAML
} > "$out/index.yaml"
"$opm" validate catalog
echo "catalog: catalog/$package/index.yaml is valid"
