#!/usr/bin/env bash
# Sanitizer check of the plugin boundary and the commit rules: builds runtime_test, sdk_test,
# arrow_test, delivery_test and the sink plugins runtime_test loads (testkit variants, stdout, the
# examples) in one clang build carrying ASan + LeakSanitizer and UBSan, build-asan-ubsan/
# (-DPICOMQ_SANITIZE=address,undefined: one cold build instead of two on a fresh machine; each
# also runs alone: `scripts/sanitize.sh address`, `undefined`; the fuzz targets share this tree,
# scripts/sanitizer-build.sh), and runs PluginCycles* (load/open/write/close/unload cycles on every
# plane, failing outcomes, refused opens and plugins), PluginHost*, PluginOptions*, Decoder*, sdk_test,
# arrow_test (Arrow export/release) and delivery_test (delivery window, committer, retries). A
# third build, build-tsan/ (thread: TSan), runs delivery_test: completions from other threads,
# stores racing commits. Every build also runs sinkkit_test (the sink kit: accumulator threads,
# fake host completions, encoders). Any sanitizer report, leak or test failure makes it exit non-zero.
# Usage: scripts/sanitize.sh [address,undefined|address|undefined|thread]...
#        (default: address,undefined thread)
# Time here (2 cores, -j2): on a fresh machine (empty ccache) the ASan+UBSan build ~7 min and
# the TSan one ~3 min, sinkkit_test ~50 s under each; after a small change 15-40 s per build. Output: per-phase wall times; logs in build-*san/.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-2}"
runtime_filter='PluginCycles*:PluginHost*:PluginOptions*'
sanitizers=("$@")
[[ ${#sanitizers[@]} -eq 0 ]] && sanitizers=(address,undefined thread)

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
timings=()
failed=()

# Runs one test binary; a report the runtime printed without failing the exit status (it should
# not happen with these options) still counts.
run_test() {
  local dir=$1 name=$2 bin=$3
  shift 3
  local log="$dir/sanitize-$name.log" t0 rc
  t0=$(now)
  # Definitions with proto / avro schemas load the schema decoders' module of this build.
  PICOMQ_MODULE_DIR="$dir/lib/picomq-connect/modules" "$bin" --gtest_brief=1 "$@" >"$log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && grep -qE 'runtime error:|ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|SUMMARY: (Address|Leak|UndefinedBehavior|Thread)Sanitizer' "$log"; then
    rc=99
  fi
  grep -E '^\[ *NOTE *\]' "$log" || true
  timings+=("$(printf '%-9s run %-13s %6ss' "$san" "$name" "$(since "$t0")")")
  if [[ $rc -ne 0 ]]; then
    echo "!! $name under $san failed (exit $rc); log: $log" >&2
    tail -n 80 "$log" >&2
    failed+=("$san:$name")
  fi
}

# The sanitizer must be able to report here at all (LeakSanitizer, for one, dies under ptrace and
# some container seccomp setups): a known leak / overflow has to fail.
canary() {
  local dir=$1 kind
  for kind in ${san//,/ }; do  # a combined build plants one bug of each kind
    local src="$dir/sanitize-canary-$kind.c" bin="$dir/sanitize-canary-$kind"
    case "$kind" in
      address) printf '#include <stdlib.h>\nvoid *p;\nint main(void) { p = malloc(7); p = 0; return 0; }\n' ;;
      undefined) printf '#include <limits.h>\nint main(int c, char **v) { int x = INT_MAX; (void)v; x += c; return x == 0; }\n' ;;
      thread) printf '#include <pthread.h>\nint n;\nvoid *run(void *a) { (void)a; n++; return 0; }\nint main(void) { pthread_t t; pthread_create(&t, 0, run, 0); n++; pthread_join(t, 0); return 0; }\n' ;;
    esac >"$src"
    clang -g -fsanitize="$san" -fno-omit-frame-pointer "$src" -o "$bin" -lpthread || return 1
    ! ("$bin" >"$bin.log" 2>&1; exit $?) 2>/dev/null && grep -qE 'ERROR: LeakSanitizer|runtime error|WARNING: ThreadSanitizer' "$bin.log" || return 1
  done
}

source "$here/scripts/compiler-cache.sh"
source "$here/scripts/sanitizer-build.sh"  # sanitizer_configure: clang, -O1, line tables, assertions on

for san in "${sanitizers[@]}"; do
  case "$san" in
    # runtime_test depends on every plugin it loads
    address,undefined) dir="$here/build-asan-ubsan"; targets=(runtime_test sdk_test arrow_test delivery_test decoders_test sinkkit_test clickhouse_arrow_test mongodb_core_test) ;;
    address) dir="$here/build-asan"; targets=(runtime_test sdk_test arrow_test delivery_test decoders_test sinkkit_test clickhouse_arrow_test mongodb_core_test) ;;
    undefined) dir="$here/build-ubsan"; targets=(runtime_test sdk_test arrow_test delivery_test decoders_test sinkkit_test clickhouse_arrow_test mongodb_core_test) ;;
    thread) dir="$here/build-tsan"; targets=(delivery_test sinkkit_test) ;;
    *) echo "unknown sanitizer '$san' (address,undefined | address | undefined | thread)" >&2; exit 2 ;;
  esac
  echo "== $san: $dir"
  t0=$(now)
  mkdir -p "$dir"
  if ! sanitizer_configure "$dir" "$san" >"$dir/sanitize-configure.log" 2>&1; then
    cat "$dir/sanitize-configure.log" >&2
    echo "!! configure failed" >&2
    exit 1
  fi
  if ! canary "$dir"; then
    echo "!! the $san sanitizer does not report a planted bug here; its results would mean nothing" >&2
    exit 1
  fi
  timings+=("$(printf '%-9s configure+canary  %6ss' "$san" "$(since "$t0")")")
  t0=$(now)
  if ! cmake --build "$dir" -j "$jobs" --target "${targets[@]}" >"$dir/sanitize-build.log" 2>&1; then
    grep -E 'error|FAILED' "$dir/sanitize-build.log" | head -n 40 >&2
    echo "!! build failed; log: $dir/sanitize-build.log" >&2
    exit 1
  fi
  timings+=("$(printf '%-9s build             %6ss' "$san" "$(since "$t0")")")
  if [[ $san != thread ]]; then
    run_test "$dir" runtime_test "$dir/tests/unit/runtime/runtime_test" --gtest_filter="$runtime_filter"
    run_test "$dir" sdk_test "$dir/tests/unit/sdk/sdk_test"
    run_test "$dir" arrow_test "$dir/tests/unit/arrow/arrow_test"
    run_test "$dir" decoders_test "$dir/tests/unit/decoders/decoders_test" --gtest_filter='Decoder*'
    # The ClickHouse sink's Native blocks read the exporter's Arrow buffers by raw pointers.
    run_test "$dir" clickhouse_arrow_test "$dir/sinks/clickhouse/tests/clickhouse_arrow_test"
    # The MongoDB sink's documents: libbson's ownership rules (a bson_t re-initialised over a
    # bson_new() leaked 128 bytes a document until LeakSanitizer was run on them).
    run_test "$dir" mongodb_core_test "$dir/sinks/mongodb/tests/mongodb_core_test"
  fi
  run_test "$dir" delivery_test "$dir/tests/unit/delivery/delivery_test"
  # The kit: accumulator (timer and writer threads), fake host completions, options, encoders.
  run_test "$dir" sinkkit_test "$dir/sinkkit/tests/sinkkit_test"
done

echo "== wall time per phase"
printf '  %s\n' "${timings[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "clean: no sanitizer finding, every test passed"
