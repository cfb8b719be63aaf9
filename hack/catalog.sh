#!/usr/bin/env bash
# make catalog: a file-based OLM catalog of the operator's package, with one channel in which each
# bundle upgrades the one before, validated with opm.
#   catalog.sh OPM OUT CHANNEL DIR=IMAGE...
# OUT is the catalog root (OUT/myproxy-operator/index.yaml is written). Each DIR=IMAGE is a bundle
# directory, rendered by opm, and the image it was pushed as, oldest first. opm renders a bundle's
# objects inline beside its image: OLM v1 pulls the image; OLM v0 unpacks the image with a Job, or,
# when IMAGE is empty, installs the inline objects as they are.
set -euo pipefail
opm=$1 out=$2 channel=$3
shift 3
[ $# -gt 0 ] || { echo "catalog: no bundle (DIR=IMAGE) given" >&2; exit 2; }
package=myproxy-operator
root=$(cd "$(dirname "$0")/.." && pwd)

mkdir -p "$out/$package"
index=$out/$package/index.yaml
names=()
{
  "$opm" init "$package" --default-channel="$channel" --description="$root/README.md" --output=yaml
  for spec in "$@"; do
    dir=${spec%%=*} image=${spec#*=}
    [ -f "$dir/metadata/annotations.yaml" ] || { echo "catalog: $dir is no bundle directory (make bundle writes one)" >&2; exit 1; }
    rendered=$("$opm" render "$dir" --output=yaml)
    name=$(awk '/^name: / {print $2; exit}' <<<"$rendered")
    echo "---"
    # opm records the directory as the bundle's image; the image it was pushed as replaces it.
    sed "s|^image: .*|image: \"$image\"|" <<<"$rendered"
    names+=("$name")
  done
  echo "---"
  printf 'schema: olm.channel\npackage: %s\nname: %s\nentries:\n' "$package" "$channel"
  previous=
  for name in "${names[@]}"; do
    echo "- name: $name"
    [ -z "$previous" ] || echo "  replaces: $previous"
    previous=$name
  done
} > "$index"
"$opm" validate "$out"
echo "catalog: $index is valid: ${names[*]} in channel $channel"
