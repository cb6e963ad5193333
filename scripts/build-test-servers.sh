#!/usr/bin/env bash
# The test servers built from source, once per machine, into ${PICOMQ_SERVER_CACHE:-~/.cache/picomq/servers}
# (each script returns at once when its binary is there). On a fresh machine this is ~17 min of Go
# (and libflux's Rust) builds, module downloads included: scripts/test.sh runs it beside the
# project's own build, and ctest's test_servers fixture waits for it (cmake/PicomqTestServers.cmake). Needs what scripts/setup.sh --no-servers installs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/clock.sh"
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
# --built: exit 0 if every server is there already, without building anything.
if [[ "${1:-}" == --built ]]; then
  for bin in ferretdb-1.24.2/ferretdb seaweedfs-4.53/weed influxdb-2.8.0/influxd helm-v4.3.2/helm; do
    [[ -x "$cache/$bin" ]] || exit 1
  done
  exit 0
fi
# FerretDB v1.24.2 (MongoDB wire protocol on PostgreSQL): the MongoDB sink's test server.
clock ferretdb "$here/sinks/mongodb/build-ferretdb.sh" >/dev/null
# SeaweedFS 4.53, the S3 sink's test server (verifies SigV4), ~7 min the first time.
clock seaweedfs bash "$here/sinks/s3/build-seaweedfs.sh" >/dev/null
# InfluxDB 2.8.0, the InfluxDB sink's v2-API test server (libflux with cargo; the v1 one is Debian's 1.6.7).
clock influxdb bash "$here/sinks/influxdb/build-influxdb.sh" >/dev/null
# Helm v4 (Go module proxy), for the chart's tests (tests/packaging), ~4 min the first time.
clock helm bash "$here/tools/helm/fetch-helm.sh" >/dev/null
echo "test servers: ok"
