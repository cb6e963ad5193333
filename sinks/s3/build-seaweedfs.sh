#!/usr/bin/env bash
# Builds SeaweedFS 4.53 (the S3 sink's test server: it verifies SigV4 signatures) once per
# machine, into a cache outside the clone:
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/seaweedfs-4.53/weed
# `go install` refuses the module (replace directives in its go.mod), so this copies the module
# from the Go module proxy and runs `go build ./weed` inside the copy (~7 min on 2 cores, nice'd).
# Prints the binary's path. Idempotent: an existing binary that runs is kept.
set -euo pipefail
version=4.53
module=github.com/seaweedfs/seaweedfs
module_version=v0.0.0-20261109003541-7506e5f91cd6
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/seaweedfs-$version"
bin="$cache/weed"

if [[ -x "$bin" ]] && "$bin" version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "seaweedfs: go is not installed (needed once to build the S3 test server)" >&2; exit 1; }

mkdir -p "$cache"
# One build at a time per machine (clones and worktrees set up side by side): wait, then re-check.
exec 9>"$cache/.build.lock"
flock 9
if [[ -x "$bin" ]] && "$bin" version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
echo "seaweedfs: building $module@$module_version into $bin (once per machine, ~7 min)" >&2
dir="$(go mod download -json "$module@$module_version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
(cd "$work/src" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$work/weed" ./weed) >&2
"$work/weed" version >/dev/null
mv "$work/weed" "$bin"
echo "$bin"
