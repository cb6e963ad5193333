#!/usr/bin/env bash
# Unpacks the SurrealDB 3.3.5 server (the build provided in the shared servers folder, see its
# README.md) once per machine into ${PICOMQ_SERVER_CACHE:-~/.cache/picomq/servers}; prints the
# binary's path. Where the shared folder is absent (a clone elsewhere) it says so and exits 3: the
# tests then skip with that reason (see tests/surreal_server.cpp).
#   PICOMQ_SHARED_SERVERS  the folder with unpack.sh (default: /work/shared/servers)
set -euo pipefail
cache="${PICOMQ_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picomq/servers}"
shared="${PICOMQ_SHARED_SERVERS:-/work/shared/servers}"
bin="$cache/surreal-3.3.5-linux-x86_64"
if [[ -x "$bin" ]]; then echo "$bin"; exit 0; fi
if [[ ! -x "$shared/unpack.sh" && ! -f "$shared/unpack.sh" ]]; then
  echo "surrealdb: no SurrealDB server here: $shared/unpack.sh is absent (set PICOMQ_SHARED_SERVERS to the folder" \
       "holding surreal-3.3.5-linux-x86_64.xz, or build the crate surrealdb-server 3.3.5 with features" \
       "storage-mem,storage-surrealkv,http into $bin)" >&2
  exit 3
fi
mkdir -p "$cache"
bash "$shared/unpack.sh" surreal "$cache"
