#!/usr/bin/env bash
# Configures and builds picomq-connect into build/ (Release with debug info, Ninja): every sink,
# the tests, the examples and the benchmarks. (scripts/quickstart.sh builds only the runtime and
# the stdout sink; this turns a tree it configured into the full one.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/compiler-cache.sh"
cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DPICOMQ_SINKS=all -DBUILD_TESTING=ON "${compiler_launcher[@]}" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$here/build" -j "$(nproc)"
