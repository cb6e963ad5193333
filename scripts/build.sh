#!/usr/bin/env bash
# Configures and builds picomq-connect into build/ (Release with debug info, Ninja).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/compiler-cache.sh"
cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "${compiler_launcher[@]}" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$here/build" -j "$(nproc)"
