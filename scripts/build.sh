#!/usr/bin/env bash
# Configures and builds picomq-connect into build/ (Release with debug info, Ninja): every sink,
# the tests, the examples and the benchmarks. (scripts/quickstart.sh builds only the runtime and
# the stdout sink; this turns a tree it configured into the full one.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/compiler-cache.sh"
source "$here/scripts/clock.sh"
# Debug info of the RelWithDebInfo build: full (-g, the release's debug packages) unless
# PICOMQ_DEBUG_INFO=lines (-g1: file and line in backtraces and sanitizer reports, what the tests
# need; scripts/test.sh sets it): full debug info is ~30% of a new machine's C++ compile time.
debug_flags=()
if [[ "${BUILD_TYPE:-RelWithDebInfo}" == RelWithDebInfo ]]; then
  case "${PICOMQ_DEBUG_INFO:-full}" in
    full) g=-g ;;
    lines) g=-g1 ;;
    *) echo "build: PICOMQ_DEBUG_INFO must be full or lines, not '$PICOMQ_DEBUG_INFO'" >&2; exit 2 ;;
  esac
  debug_flags=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 $g -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 $g -DNDEBUG")
fi
clock configure cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DPICOMQ_SINKS=all -DBUILD_TESTING=ON "${compiler_launcher[@]}" "${debug_flags[@]}" \
  -DPICOMQ_CARGO_PROFILE="${PICOMQ_CARGO_PROFILE:-release}" -DPICOMQ_CARGO_TIMINGS="${CI:+ON}" \
  ${CMAKE_ARGS:-} >/dev/null
# The Rust workspace first (cargo keeps both cores busy on its own), then the C++ tree: the clock
# tells the two apart.
# (grep reads the whole list: `grep -q` would end ninja with SIGPIPE, failing the pipeline.)
if ninja -C "$here/build" -t targets all 2>/dev/null | grep '^picomq_rust_workspace:' >/dev/null; then
  clock rust cmake --build "$here/build" -j "$(nproc)" --target picomq_rust_workspace
  python3 "$here/scripts/cargo_timings.py" "${PICOMQ_CARGO_TARGET:-$HOME/.cache/picomq/cargo-target}/cargo-timings" || true
fi
clock cxx cmake --build "$here/build" -j "$(nproc)"
