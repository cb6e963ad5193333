#!/usr/bin/env bash
# librdkafka 2.12.1, the one Kafka client of picomq-connect (runtime, dead-letter producer, embedded
# broker, tests), built once per machine from its complete source as crates.io serves it: the source
# of the `rdkafka-sys 4.10.0+2.12.1` crate (pinned by version and SHA-256 below). Static, with
# position-independent code, SSL, SASL (SCRAM, OAUTHBEARER, and GSSAPI through Cyrus SASL), zstd
# and zlib; Debian 12's librdkafka is 2.0.2, which has neither KIP-848 nor a fetcher that wakes
# on its own (docs/runtime.md). Without libcurl: librdkafka uses it only to fetch OAUTHBEARER
# tokens from an OIDC endpoint, and loading Debian's libcurl (30 libraries: gnutls, rtmp, ldap,
# krb5...) costs every runtime 4 MB of memory before its first record (bench/README.md).
#   scripts/build-librdkafka.sh [PREFIX] [tsan]
#       default PREFIX ${PICOMQ_DEPS_CACHE:-~/.cache/picomq}/librdkafka-2.12.1 (-tsan for the variant)
# tsan: the variant the ThreadSanitizer builds link (scripts/tsan-runtime.sh): on POSIX threads, not
# C11's — glibc's thrd_create / mtx_lock call its internal pthread functions, which TSan does not
# intercept, so a runtime on the default build crashes in its first broker thread, and TSan would
# not see librdkafka's locks. Not instrumented itself: its own accesses are not ours to judge (TSan
# reports benign races inside it), while its locks, through the pthread interceptors, still order
# our callbacks and what they touch.
#   scripts/build-librdkafka.sh --performance-tool OUT
#       librdkafka's own benchmark client, rdkafka_performance (examples/ of the same source), built
#       against the default PREFIX's library into OUT: bench/stdout_vs_kcat.sh runs it beside kcat.
# Returns at once when PREFIX holds a finished build. CMake runs it at configure time
# (cmake/PicomqRdkafka.cmake); needs what scripts/setup.sh --build-only installs.
set -euo pipefail
version=2.12.1
crate=rdkafka-sys-4.10.0+${version}
crate_sha256=e234cf318915c1059d4921ef7f75616b5219b10b46e9f3a511a15eb4b56a3f77
performance_tool=""
if [[ "${1:-}" == --performance-tool ]]; then performance_tool="${2:?OUT}"; set --; fi
variant="${2:-}"
[[ -z "$variant" || "$variant" == tsan ]] || { echo "librdkafka: unknown variant '$variant' (tsan)" >&2; exit 2; }
prefix="${1:-${PICOMQ_DEPS_CACHE:-$HOME/.cache/picomq}/librdkafka-$version${variant:+-$variant}}"
features=(-DWITH_SSL=ON -DWITH_SASL=ON -DWITH_ZSTD=ON -DWITH_ZLIB=ON -DWITH_CURL=OFF -DENABLE_LZ4_EXT=OFF)
[[ "$variant" == tsan ]] && features+=(-DPICOMQ_VARIANT=posix-threads)  # (a name for the stamp only)
# A build with other features is not a finished build.
stamp="$prefix/.complete-$crate_sha256-$(echo "${features[*]}" | sha256sum | cut -c1-12)"
[[ -z "$performance_tool" && -f "$stamp" ]] && exit 0
[[ -n "$performance_tool" && ! -f "$stamp" ]] && { echo "librdkafka: no build in $prefix yet" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/librdkafka-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
archive="$work/$crate.crate"
# The crate cargo already downloaded, else crates.io's download host.
cached=$(ls "$HOME"/.cargo/registry/cache/*/"$crate.crate" 2>/dev/null | head -1 || true)
if [[ -n "$cached" ]]; then
  cp "$cached" "$archive"
else
  echo "librdkafka: downloading $crate from crates.io" >&2
  curl -fsSL --retry 3 -o "$archive" "https://static.crates.io/crates/rdkafka-sys/$crate.crate"
fi
actual=$(sha256sum "$archive" | cut -d' ' -f1)
if [[ "$actual" != "$crate_sha256" ]]; then
  echo "librdkafka: $crate.crate has SHA-256 $actual, expected $crate_sha256; not building it" >&2
  exit 1
fi
tar -xzf "$archive" -C "$work"
src="$work/$crate/librdkafka"
grep -q "define RD_KAFKA_VERSION 0x020c01ff" "$src/src/rdkafka.h" || {
  echo "librdkafka: $crate does not hold librdkafka $version" >&2
  exit 1
}

if [[ -n "$performance_tool" ]]; then
  # It includes the library's internal headers, which read the config.h its configure generates.
  cmake -S "$src" -B "$work/build" -G Ninja -DRDKAFKA_BUILD_STATIC=ON -DRDKAFKA_BUILD_EXAMPLES=OFF \
    -DRDKAFKA_BUILD_TESTS=OFF "${features[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
  cp "$work/build/generated/config.h" "$src/config.h"
  mkdir -p "$(dirname "$performance_tool")"
  cc -O2 -o "$performance_tool" "$src/examples/rdkafka_performance.c" -I"$src/src" -I"$prefix/include/librdkafka" \
    "$prefix/lib/librdkafka.a" -lssl -lcrypto -lsasl2 -lzstd -lz -lpthread -lm -ldl
  echo "librdkafka: rdkafka_performance $version in $performance_tool" >&2
  exit 0
fi

echo "librdkafka: building $version into $prefix (a few minutes, once per machine)" >&2
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
rm -rf "$prefix"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_POSITION_INDEPENDENT_CODE=ON "${launcher[@]}" \
  -DRDKAFKA_BUILD_STATIC=ON -DRDKAFKA_BUILD_EXAMPLES=OFF -DRDKAFKA_BUILD_TESTS=OFF \
  "${features[@]}" \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
if [[ "$variant" == tsan ]]; then
  # Its configure finds <threads.h> and has no switch against it: the generated config says no.
  config="$work/build/generated/config.h"
  grep -q "define WITH_C11THREADS 1" "$config" || { echo "librdkafka: $config has no WITH_C11THREADS 1" >&2; exit 1; }
  sed -i 's/define WITH_C11THREADS 1/define WITH_C11THREADS 0/' "$config"
fi
cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" >/dev/null
cp "$src/LICENSES.txt" "$prefix/LICENSES.txt"
touch "$stamp"
echo "librdkafka: $version ready in $prefix" >&2
