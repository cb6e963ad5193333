#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, then the integration tests against a real
# Apache Kafka broker (KRaft) that the tests start and stop themselves. The suites that wait on
# servers run side by side (PICOMQ_TEST_JOBS, default 3: each starts its own broker and servers on
# free loopback ports); `bash scripts/test.sh -j1` runs them one after another.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/clock.sh"
clock setup-packages "$here/scripts/setup.sh" --packages-only
rm -f "$here/build/.test-build-done"
# The test servers that are not Debian packages (scripts/build-test-servers.sh: a new machine's
# longest phase, Go builds and libflux's cargo build) start first, beside setup's downloads and
# the project's build, and go on beside ctest: only the tests that use a server wait for it (the
# CTest fixtures test_server_<name>, cmake/PicomqTestServers.cmake). With arguments (a chosen set
# of tests) a fixture builds what is missing on its own, only when a chosen test needs it.
jobs="${PICOMQ_TEST_JOBS:-3}"
servers_pid=
if (($# == 0)) && ! bash "$here/scripts/build-test-servers.sh" --built 2>/dev/null; then
  servers_log="$(mktemp -t picomq-test-servers.XXXXXX)"
  # Niced: the project's build comes first, the servers take what it leaves.
  clock servers nice -n 10 bash "$here/scripts/build-test-servers.sh" >"$servers_log" 2>&1 &
  servers_pid=$!
  trap 'kill "$servers_pid" 2>/dev/null || true' EXIT
  jobs=$((jobs + 1))   # a test_server_<name> holds a slot while it waits for its server
fi
# Setup's downloads (Kafka's jars, the search nodes, the Python readers' virtualenv: ~3 min of
# network on a new machine) are for the tests only: they go on beside the build.
setup_log="$(mktemp -t picomq-test-setup.XXXXXX)"
clock setup "$here/scripts/setup.sh" --no-servers >"$setup_log" 2>&1 &
setup_pid=$!
# The tests' build: line tables only (scripts/build.sh), the Rust workspace in its CI profile
# (Cargo.toml: unoptimized, a quarter of the release profile's compile time). A benchmark's build
# (bench/lib.sh) goes back to full debug info and the release profile.
export PICOMQ_DEBUG_INFO="${PICOMQ_DEBUG_INFO:-lines}" PICOMQ_CARGO_PROFILE="${PICOMQ_CARGO_PROFILE:-ci}"
clock build "$here/scripts/build.sh"
if ! wait "$setup_pid"; then
  cat "$setup_log" >&2
  echo "setup: failed (scripts/setup.sh --no-servers); its log is above" >&2
  exit 1
fi
grep -v '^\[clock\]' "$setup_log" || true
rm -f "$setup_log"
touch "$here/build/.test-build-done"   # .ci/run starts its checks that need the build (style) beside the tests
cd "$here/build"
# The order of the last run (the longest suites first), kept outside the clone: a clean clone has
# no CTest cost data, and then schedules by declared COST only.
costs="${XDG_CACHE_HOME:-$HOME/.cache}/picomq/ctest-costs.txt"
if [[ -f "$costs" && ! -f Testing/Temporary/CTestCostData.txt ]]; then
  mkdir -p Testing/Temporary && cp "$costs" Testing/Temporary/CTestCostData.txt
fi
rc=0
clock ctest ctest --output-on-failure --timeout 1800 -j "$jobs" "$@" || rc=$?
if (($# == 0)) && [[ -f Testing/Temporary/CTestCostData.txt ]]; then
  mkdir -p "$(dirname "$costs")" && cp Testing/Temporary/CTestCostData.txt "$costs"
fi
if [[ -n "$servers_pid" ]]; then
  wait "$servers_pid" || { echo "test servers: the background build failed (scripts/build-test-servers.sh); its log:" >&2
                           tail -n 60 "$servers_log" >&2; rc=1; }
  trap - EXIT
  rm -f "$servers_log"
fi
exit "$rc"
