#!/usr/bin/env bash
# progress.sh NAME ESTIMATE COMMAND...: runs COMMAND, saying when NAME starts and finishes, and
# every 30 seconds meanwhile that it is still at work, against ESTIMATE (what a first build takes
# on 2 cores without a Go build cache; with one it is much shorter). A long first build then
# shows it is alive and how far along it should be.
set -euo pipefail

name=$1 estimate=$2
shift 2
start=$SECONDS
echo "build: $name: starting (a first build takes about $estimate)" >&2
"$@" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' INT TERM
while kill -0 "$pid" 2>/dev/null; do
  for _ in $(seq 30); do
    sleep 1
    kill -0 "$pid" 2>/dev/null || break
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "build: $name: still building, $((SECONDS - start))s so far (about $estimate for a first build)" >&2
  fi
done
status=0
wait "$pid" || status=$?
if [ "$status" = 0 ]; then
  echo "build: $name: done in $((SECONDS - start))s" >&2
else
  echo "build: $name: failed after $((SECONDS - start))s" >&2
fi
exit "$status"
