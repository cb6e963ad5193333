#!/usr/bin/env bash
# Sets up, builds and runs the quickstart: an embedded Kafka-protocol broker inside the process,
# sample orders on orders.eu / orders.us, and the spec's example definition into stdout.
# Interactive: runs until Ctrl-C (produce more with kcat into the address it prints).
# Not interactive (CI): stops after QUICKSTART_SECONDS (default 10).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh" --build-only  # no test servers: the quickstart needs none
"$here/scripts/build.sh"
args=(--config "$here/examples/quickstart/runtime.toml")
if [[ -n "${QUICKSTART_SECONDS:-}" ]]; then
  args+=(--stop-after "${QUICKSTART_SECONDS}s")
elif [[ ! -t 0 ]]; then
  args+=(--stop-after 10s)
fi
echo "quickstart: records appear below as JSON lines; logs go to stderr." >&2
exec "$here/build/bin/picomq-connect" "${args[@]}"
