#!/usr/bin/env bash
# Sets up, builds and runs the quickstart: an embedded Kafka-protocol broker inside the process,
# sample orders on orders.eu / orders.us, and the spec's example definition into stdout.
# It installs only what the runtime and the stdout sink need (scripts/setup.sh --build-only) and
# builds only those two targets: a fresh machine runs it in a few minutes (README).
# Interactive: runs until Ctrl-C (produce more with kcat into the address it prints).
# Not interactive (CI): stops after QUICKSTART_SECONDS (default 10).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh" --build-only  # no test servers: the quickstart needs none
source "$here/scripts/compiler-cache.sh"
# A build tree made by scripts/build.sh is used as it is (the two targets are in it); otherwise
# one with only the stdout sink, no tests and none of the modules the quickstart never loads
# (schema decoders, operations API), so configuring needs no other sink's libraries.
if [[ ! -f "$here/build/CMakeCache.txt" ]]; then
  cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
    -DPICOMQ_SINKS=stdout -DBUILD_TESTING=OFF -DPICOMQ_MODULES=OFF "${compiler_launcher[@]}" >/dev/null
fi
cmake --build "$here/build" -j "$(nproc)" --target picomq-connect picomq_connector_stdout_sink
args=(--config "$here/examples/quickstart/runtime.toml")
if [[ -n "${QUICKSTART_SECONDS:-}" ]]; then
  args+=(--stop-after "${QUICKSTART_SECONDS}s")
elif [[ ! -t 0 ]]; then
  args+=(--stop-after 10s)
fi
echo "quickstart: records appear below as JSON lines; logs go to stderr." >&2
exec "$here/build/bin/picomq-connect" "${args[@]}"
