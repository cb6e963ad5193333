#!/usr/bin/env bash
# Out-of-tree SDK check: install this build, build example sinks outside the repository
# against the installed SDK (CMake find_package for C++, pkg-config for C), run them through
# the installed picomq-connect on its embedded broker, and run the installed conformance suite
# for the kit sink against a real Kafka broker (started with the installed launcher).
# Usage: run.sh <build dir>
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$1"
work="$(mktemp -d /tmp/picomq-oot.XXXXXX)"
prefix="$work/prefix"
launcher="$prefix/share/picomq-sdk/testing/kafka.sh"
cleanup() {
  if [[ -d "$work/kafka" ]]; then "$launcher" stop "$work/kafka" > /dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in include/picomq/sink_abi.h include/picomq/sdk.hpp include/picomq/arrow_c_data.h \
         include/picomq/kit/accumulator.hpp include/picomq/kit/testing/fake_host.hpp \
         lib/libpicomq-sinkkit.a lib/libpicomq-sinkkit-testing.a lib/cmake/picomq-sdk/PicomqAddSink.cmake \
         lib/cmake/picomq-sdk/picomq-sdk-config.cmake lib/pkgconfig/picomq-sdk.pc lib/pkgconfig/picomq-sinkkit.pc \
         share/picomq-sdk/testing/nginx.sh share/picomq-sdk/testing/server-watchdog.sh \
         include/picomq/kit/testing/conformance.hpp include/picomq/kit/testing/harness.hpp \
         lib/libpicomq-conformance.a lib/libpicomq-harness.a lib/cmake/picomq-sdk/PicomqAddConformanceTest.cmake \
         lib/cmake/picomq-sdk/conformance_main.cpp share/picomq-sdk/testing/kafka.sh bin/picomq-connect; do
  [[ -e "$prefix/$f" ]] || { echo "not installed: $f" >&2; exit 1; }
done
# The installed nginx.sh finds the watchdog it sources beside it, outside the tree.
bash "$repo/sinkkit/tests/server_watchdog_test.sh" nginx "$prefix/share/picomq-sdk/testing/nginx.sh" > "$work/watchdog.log" 2>&1 \
  || { cat "$work/watchdog.log" >&2; exit 1; }

# C++ with find_package(picomq-sdk), from copies of the examples outside the repository.
mkdir -p "$work/plugins"
for example in batch_cpp arrow_cpp; do
  cp -r "$repo/examples/sinks/$example" "$work/$example"
  cmake -S "$work/$example" -B "$work/$example/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log" \
    || { cat "$work/cmake.log" >&2; exit 1; }
  cmake --build "$work/$example/build" > "$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
  cp "$work/$example"/build/*.so "$work/plugins/"
done

# The sink kit with find_package(picomq-sdk COMPONENTS sinkkit sinkkit_testing OPTIONAL_COMPONENTS
# conformance) and picomq_add_sink(): the plugin, its unit test on the installed fake host and
# its conformance executable (picomq_add_conformance_test(), run below).
cp -r "$repo/examples/sinks/kit_cpp" "$work/kit_cpp"
cmake -S "$work/kit_cpp" -B "$work/kit_cpp/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log" \
  || { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/kit_cpp/build" > "$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
"$work/kit_cpp/build/files_sink_test" > "$work/kit_test.log" 2>&1 || { cat "$work/kit_test.log" >&2; exit 1; }
exports="$(nm -D --defined-only "$work/kit_cpp/build/libpicomq_connector_example_files_sink.so" | awk '{print $3}')"
[[ "$exports" == picomq_sink_plugin_entry ]] || { echo "the kit sink exports: $exports" >&2; exit 1; }
cp "$work/kit_cpp/build/libpicomq_connector_example_files_sink.so" "$work/plugins/"
# The kit through pkg-config too (a build system without CMake).
kit_flags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs picomq-sinkkit)"
# shellcheck disable=SC2086
c++ -std=c++20 -shared -fPIC -fvisibility=hidden "$repo/examples/sinks/kit_cpp/files_sink.cpp" $kit_flags \
  -o "$work/pkgconfig_files_sink.so" || { echo "pkg-config build of the kit example failed" >&2; exit 1; }

# Plain C with pkg-config.
cflags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags picomq-sdk)"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror -shared -fPIC $cflags "$repo/examples/sinks/c_sink/c_sink.c" \
  -o "$work/plugins/libpicomq_connector_example_c_sink.so"

# Run both on the embedded broker with the quickstart's sample orders (10 records, 2 topics).
mkdir -p "$work/run/sinks.d"
cp "$repo"/examples/quickstart/*.jsonl "$work/run/"
cat > "$work/run/runtime.toml" <<TOML
[broker.embedded]
topics = ["orders.eu", "orders.us"]
[[broker.embedded.seed]]
topic = "orders.eu"
file = "orders.eu.jsonl"
[[broker.embedded.seed]]
topic = "orders.us"
file = "orders.us.jsonl"
[plugins]
path = ["$work/plugins"]
[sinks]
dir = "sinks.d"
TOML
cat > "$work/run/sinks.d/cpp.toml" <<TOML
type = "sink"
key = "cpp"
path = "libpicomq_connector_example_fsync_batch_sink"
[[topics]]
pattern = "orders[.].*"
[plugin_config]
path = "$work/cpp.out"
TOML
cat > "$work/run/sinks.d/c.toml" <<TOML
type = "sink"
key = "c"
path = "libpicomq_connector_example_c_sink"
[[topics]]
topics = ["orders.eu", "orders.us"]
[plugin_config]
path = "$work/c.out"
TOML
cat > "$work/run/sinks.d/arrow.toml" <<TOML
type = "sink"
key = "arrow"
path = "libpicomq_connector_example_arrow_csv_sink"
[[topics]]
topics = ["orders.eu"]
[plugin_config]
path = "$work/arrow.csv"
TOML
cat > "$work/run/sinks.d/kit.toml" <<TOML
type = "sink"
key = "kit"
path = "libpicomq_connector_example_files_sink"
[[topics]]
pattern = "orders[.].*"
[plugin_config]
directory = "$work/kit-out"
file = "{topic_segment[-1]}.ndjson"
TOML
(cd "$work/run" && "$prefix/bin/picomq-connect" --config runtime.toml --stop-after 6s 2> "$work/run.log") \
  || { cat "$work/run.log" >&2; exit 1; }

expected=$(printf '%s\n' orders.eu:0:{0..4} orders.us:0:{0..4} | sort)
got_cpp=$(cut -f1 "$work/cpp.out" | sort)
got_c=$(cut -f1 "$work/c.out" | sort)
[[ "$got_cpp" == "$expected" ]] || { echo "C++ sink wrote:"; echo "$got_cpp"; cat "$work/run.log"; exit 1; } >&2
[[ "$got_c" == "$expected" ]] || { echo "C sink wrote:"; echo "$got_c"; cat "$work/run.log"; exit 1; } >&2
# The Arrow sink got one Arrow batch: a header with the metadata columns and the orders'
# fields, then 5 rows in offset order.
header="$(head -1 "$work/arrow.csv")"
[[ "$header" == '"pico_topic","pico_partition","pico_offset","pico_timestamp","pico_key","pico_headers",'* ]] \
  || { echo "Arrow CSV header: $header"; exit 1; } >&2
[[ "$(tail -n +2 "$work/arrow.csv" | cut -d, -f3 | tr '\n' ' ')" == "0 1 2 3 4 " ]] \
  || { echo "Arrow CSV rows:"; cat "$work/arrow.csv"; exit 1; } >&2
for region in eu us; do
  got_kit=$(python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["pico_offset"]) for l in open(sys.argv[1])))' \
    "$work/kit-out/$region.ndjson" 2>&1) || true
  [[ "$got_kit" == "0 1 2 3 4" ]] || { echo "kit sink wrote for $region: $got_kit"; cat "$work/run.log"; exit 1; } >&2
done
grep -q "c sink closing after 10 records" "$work/run.log" || { echo "close() did not run"; cat "$work/run.log"; exit 1; } >&2
# The conformance suite for the kit sink, as its build registered it (ctest example_files_conformance).
conformance="$work/kit_cpp/build/example_files_conformance"
[[ -x "$conformance" ]] || { echo "picomq_add_conformance_test() made no $conformance" >&2; exit 1; }
# With neither a broker nor Kafka's jars, the installed launcher (the built-in default) says what to set.
if PICOMQ_CONFORMANCE_BOOTSTRAP= PICOMQ_KAFKA_LIBS= "$conformance" > "$work/no_broker.log" 2>&1; then
  echo "the conformance suite passed without a broker" >&2; cat "$work/no_broker.log" >&2; exit 1
fi
grep -q "kafka.sh: no Kafka jars" "$work/no_broker.log" && grep -q "PICOMQ_CONFORMANCE_BOOTSTRAP=host:port" "$work/no_broker.log" \
  || { echo "no clear message without a broker:"; cat "$work/no_broker.log"; exit 1; } >&2

# A broker on free loopback ports (p and p+1, below the ephemeral range), started with the
# installed launcher on this tree's Kafka jars; the suite gets it as a running broker.
port=""
for _ in $(seq 1 100); do
  p=$((20000 + RANDOM % 11998))
  if ! (exec 3<> "/dev/tcp/127.0.0.1/$p") 2> /dev/null && ! (exec 3<> "/dev/tcp/127.0.0.1/$((p + 1))") 2> /dev/null; then
    port=$p; break
  fi
done
[[ -n "$port" ]] || { echo "no free port pair for Kafka" >&2; exit 1; }
"$repo/tools/kafka/fetch-kafka.sh"   # once; scripts/setup.sh has usually done it
PICOMQ_KAFKA_LIBS="$repo/tools/kafka/libs" "$launcher" start "$work/kafka" "$port" > "$work/kafka.log" 2>&1 \
  || { cat "$work/kafka.log" >&2; exit 1; }
PICOMQ_CONFORMANCE_BOOTSTRAP="127.0.0.1:$port" ctest --test-dir "$work/kit_cpp/build" -R '^example_files_conformance$' -V \
  > "$work/conformance.log" 2>&1 || { cat "$work/conformance.log" >&2; exit 1; }
# 5 cases pass; the 3 it cannot take part in are skipped with the reasons of its Capabilities.
grep -q "\[  PASSED  \] 5 tests" "$work/conformance.log" && grep -q "\[  SKIPPED \] 3 tests" "$work/conformance.log" \
  && [[ "$(grep -c "which a test cannot make fail and then work again" "$work/conformance.log")" -ge 2 ]] \
  && grep -q "refuses none" "$work/conformance.log" \
  || { echo "conformance suite for the kit sink:"; cat "$work/conformance.log"; exit 1; } >&2
echo "out-of-tree SDK: installed, built (find_package + pkg-config) and ran the C++ batch, C++ Arrow, C and sink-kit sinks (and the kit sink's fake-host test and conformance suite): ok"
