#!/usr/bin/env bash
# The runtime under ThreadSanitizer, through a real broker: picomq-connect and the plugins the
# runtime's tests load are built with TSan in build-tsan/ (clang, scripts/sanitizer-build.sh; it
# links librdkafka's TSan variant, instrumented and on POSIX threads: scripts/build-librdkafka.sh),
# and the normal build's integration_test and ops_test drive them (PICOMQ_CONNECT_BIN,
# PICOMQ_PLUGIN_PATH): consume / deliver / commit, rebalances and the fleet of KIP-848 members,
# async completions, crashes and restarts, reloads, the API and metrics, shutdown. Every runtime
# the tests start writes TSan's reports into files (log_path); any report, or a failed test, fails
# the run, and the reports are printed.
# Usage: scripts/tsan-runtime.sh [integration gtest filter] [ops gtest filter]
#   TSAN_SECONDS_MULTIPLIER (default 4): the tests' waits, scaled for TSan's slowdown.
# Time here (2 cores): the TSan build ~1 min after the normal build (librdkafka's variant, the
# runtime and ten plugins; more on a fresh compiler cache), the default suites ~8 min (98
# integration tests, 12 ops tests).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
integration_filter="${1:-Loop.*:Commit.*:Subscription*:Robustness.*:Async.*:Crash.*:Lifecycle.*:Restart.*:Fleets/*:Planes*:StdoutSink.*:BadRecords.*:Transforms.*:PostgresSink.*}"
ops_filter="${2:-*}"
dir="$here/build-tsan"
plugins=(picomq_connector_stdout_sink picomq_connector_postgres_sink picomq_connector_testkit_sink
  picomq_connector_testkit_rows_sink picomq_connector_testkit_arrow_sink picomq_connector_testkit_async_sink
  picomq_connector_testkit_future_abi_sink picomq_connector_lifecycle_sink picomq_connector_abi21_sink
  picomq_connector_validating_sink)

source "$here/scripts/compiler-cache.sh"
source "$here/scripts/sanitizer-build.sh"
source "$here/scripts/clock.sh"

clock_begin tsan-build
mkdir -p "$dir"
sanitizer_configure "$dir" thread >"$dir/tsan-configure.log" 2>&1 || { cat "$dir/tsan-configure.log" >&2; exit 1; }
cmake --build "$dir" --target picomq-connect "${plugins[@]}" >"$dir/tsan-build.log" 2>&1 || {
  grep -E 'error|FAILED' "$dir/tsan-build.log" | head -40 >&2
  echo "!! the TSan build failed; log: $dir/tsan-build.log" >&2
  exit 1
}
# The drivers: the normal build's test binaries (not instrumented; only the runtime is under test).
cmake --build "$here/build" --target integration_test ops_test >"$dir/tsan-drivers.log" 2>&1 || {
  tail -40 "$dir/tsan-drivers.log" >&2
  exit 1
}
clock_end tsan-build

reports="$(mktemp -d "${TMPDIR:-/tmp}/picomq-tsan.XXXXXX")"
export PICOMQ_CONNECT_BIN="$dir/bin/picomq-connect"
export PICOMQ_PLUGIN_PATH="$dir/plugins"
export PICOMQ_TEST_TIMEOUT_MULTIPLIER="${TSAN_SECONDS_MULTIPLIER:-4}"
# Reports to files (the tests read the runtime's stderr), the run goes on after one, so that a run
# shows them all; exitcode 0: a report must not turn into a test's failed exit status.
# Suppressed: races inside librdkafka only (scripts/tsan-suppressions.txt says why).
export TSAN_OPTIONS="log_path=$reports/tsan:halt_on_error=0:exitcode=0:second_deadlock_stack=1:history_size=4:suppressions=$here/scripts/tsan-suppressions.txt${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
export PICOMQ_MODULE_DIR="$dir/lib/picomq-connect/modules"

failed=0
clock_begin tsan-integration
"$here/build/tests/integration/integration_test" --gtest_brief=1 --gtest_filter="$integration_filter" \
  >"$reports/integration.log" 2>&1 || { failed=1; tail -60 "$reports/integration.log" >&2; }
clock_end tsan-integration
clock_begin tsan-ops
"$here/build/tests/ops/ops_test" --gtest_brief=1 --gtest_filter="$ops_filter" >"$reports/ops.log" 2>&1 ||
  { failed=1; tail -60 "$reports/ops.log" >&2; }
clock_end tsan-ops

grep -hE '^\[ *(PASSED|FAILED) *\]' "$reports/integration.log" "$reports/ops.log"
found=$(ls "$reports"/tsan.* 2>/dev/null | wc -l)
if [[ $found -gt 0 ]]; then
  echo "!! ThreadSanitizer reported in $found runtime processes:" >&2
  cat "$reports"/tsan.* >&2
  failed=1
fi
if [[ $failed -ne 0 ]]; then
  echo "tsan-runtime: FAILED (logs and reports in $reports)" >&2
  exit 1
fi
echo "tsan-runtime: clean: no ThreadSanitizer report from any runtime, every test passed"
rm -rf "$reports"
