#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, then the integration tests against a real
# Apache Kafka broker (KRaft) that the tests start and stop themselves. The suites that wait on
# servers run side by side (PICOMQ_TEST_JOBS, default 3: each starts its own broker and servers on
# free loopback ports); `bash scripts/test.sh -j1` runs them one after another.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/clock.sh"
clock setup "$here/scripts/setup.sh" --no-servers
rm -f "$here/build/.test-build-done"
# The test servers built from source (a fresh machine: ~17 min of Go builds and module downloads)
# go up beside the project's build; the tests wait for both.
servers_log="$(mktemp -t picomq-test-servers.XXXXXX)"
clock servers bash "$here/scripts/build-test-servers.sh" >"$servers_log" 2>&1 &
servers_pid=$!
trap 'kill "$servers_pid" 2>/dev/null || true' EXIT
clock build "$here/scripts/build.sh"
touch "$here/build/.test-build-done"   # .ci/run starts its checks that need the build (style) beside the tests
if ! wait "$servers_pid"; then
  echo "test servers: the build failed (scripts/build-test-servers.sh); its log:" >&2
  tail -n 60 "$servers_log" >&2
  exit 1
fi
trap - EXIT
rm -f "$servers_log"
cd "$here/build"
clock ctest ctest --output-on-failure --timeout 1800 -j "${PICOMQ_TEST_JOBS:-3}" "$@"
