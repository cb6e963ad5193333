# shellcheck shell=bash
# Sourced by sanitize.sh and fuzz.sh: how a sanitizer build tree is configured, in one place, so
# that the ASan+UBSan check and the libFuzzer targets share one tree (build-asan-ubsan/): a new
# machine compiles the kit, the config, the transforms and the decoders under ASan once, not
# twice (the fuzz tree alone was ~15 CPU-minutes there).
#
# clang for every sanitizer build: libFuzzer comes with it, and it compiles an ASan+UBSan
# translation unit about twice as fast as gcc (sinkkit/src/option_groups.cpp: 6.4 s against
# 12.8 at -O0). -O1 with line tables only (OSS-Fuzz's flags; the sanitizers' own advice for
# reports that still have file:line) and assertions on (Debug without -DNDEBUG): a fuzz target or
# a test that trips an assert is a finding.
#
# sanitizer_configure <dir> <address,undefined|address|undefined|thread>: configures <dir>, the
# combined one with -DPICOMQ_FUZZ=ON (the libraries the fuzz targets exercise get coverage
# instrumentation too; the tests that link them run with it, ASan's runtime provides its hooks).
# Needs $here (the clone) and compiler_launcher (scripts/compiler-cache.sh).
sanitizer_configure() {
  local dir=$1 san=$2 fuzz=OFF
  [[ $san == address,undefined ]] && fuzz=ON
  mkdir -p "$dir"
  cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPICOMQ_SANITIZE="$san" -DPICOMQ_FUZZ="$fuzz" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${compiler_launcher[@]}" \
    -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only"
}
