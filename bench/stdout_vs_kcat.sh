#!/usr/bin/env bash
# Benchmark: picomq-connect (stdout sink, output to /dev/null) vs kcat -C and librdkafka's
# rdkafka_performance -C, all consuming the same topic of a real single-node Apache Kafka broker,
# one after the other, R rounds. Each run also reports the broker's CPU time over it (server_cpu_s)
# and the requests the broker served meanwhile, by API (its JMX: req_fetch, req_commit,
# req_heartbeat, req_other). See bench/README.md. Not a test: ctest does not run it.
#
# Environment:
#   BENCH_RECORDS=1000000   records produced into bench.stdout (~205 B JSON each)
#   BENCH_RUNS=3            rounds; each round runs every consumer once (order alternates)
#   BENCH_SKIP_BUILD=0      1: skip scripts/setup.sh + scripts/build.sh (use the existing build/)
#   BENCH_KCAT_JSON=1       0: skip the `kcat -J` (JSON envelope) variant
#   BENCH_RDKAFKA_PERF=1    0: skip `rdkafka_performance -C` (librdkafka's own loop, nothing printed)
#   BENCH_FILE=0            1: each round also runs `kcat -f` and `picomq lines` writing to a file
#                           on disk instead of /dev/null ("... > file")
#   BENCH_COMMIT_INTERVAL=  offset_commit_interval of the sink definition (unset: the runtime's default)
#   BENCH_WARMUP=1          0: skip the untimed warm-up read before the first round
#   BENCH_BATCH_LENGTH=1000 batch_length of the sink definition
#   BENCH_SCHEMA=json       schema of the sink definition (json or raw; raw prints base64 JSON strings)
#   BENCH_BASELINE=         another build dir (its bin/picomq-connect and plugins/, e.g. of an
#                           earlier commit): each round also runs it as "baseline lines", and the
#                           report gives this build / the baseline, side by side in the same run
#   BENCH_API=0             1: each round also runs "picomq lines +api": the lines variant with the
#                           operations API on and /metrics scraped every second meanwhile; the
#                           report ends with its overhead against "picomq lines" (docs/operations.md)
#   BENCH_KEEP=0            1: keep the work dir (broker log, runtime logs, raw results)
#   BENCH_DIR=              work dir (default: a new mktemp -d under /tmp)
# Smoke mode for CI: BENCH_RECORDS=20000 BENCH_RUNS=1 (add BENCH_SKIP_BUILD=1 after a build).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N="${BENCH_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
KCAT_JSON="${BENCH_KCAT_JSON:-1}"
WARMUP="${BENCH_WARMUP:-1}"
BATCH_LENGTH="${BENCH_BATCH_LENGTH:-1000}"
KEEP="${BENCH_KEEP:-0}"
TOPIC="bench.stdout"
bench_require_positive BENCH_RECORDS "$N"
bench_require_positive BENCH_RUNS "$RUNS"

bench_init_workdir picomq-bench "$KEEP"

# ------------------------------------------------------------------ build
bench_build "$SKIP_BUILD"
[[ -x "$bin" && -f "$plugins/libpicomq_connector_stdout_sink.so" ]] || { echo "no build in $repo/build (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
bench_require_kcat
bench_compile_helper
RDKAFKA_PERF="${BENCH_RDKAFKA_PERF:-1}"
[[ "$RDKAFKA_PERF" == 1 ]] && bench_require_rdkafka_performance
FILE_VARIANT="${BENCH_FILE:-0}"

# ------------------------------------------------------------------ broker + data
bench_broker_jmx
bench_start_kafka
bench_create_topic "$TOPIC" 1
bench_produce_records "$TOPIC" "$N" --log-duration
rm -f "$records_file"   # the page cache is better spent on the broker's log

# ------------------------------------------------------------------ consumers
results="$work/results.txt"
: > "$results"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"  # load flatters or hides: printed with the results
log "load average before the consumers: $load_start"

# The broker's requests over one measured run, appended to its result line.
requests_before=""
count_requests() { requests_before="$(bench_broker_requests)"; }
requests_since() { bench_requests_between "$requests_before" "$(bench_broker_requests)"; }

run_kcat() {  # <label> <run> <output file> kcat format args...
  local label="$1" run="$2" output="$3"; shift 3
  local out
  count_requests
  out="$("$helper" run "$output" --server "$broker_pid" -- kcat -C -b "$bootstrap" -t "$TOPIC" -o beginning -c "$N" -e -q "$@")"
  [[ "$out" == *" exit=0"* ]] || { echo "$label failed: $out" >&2; exit 1; }
  out+=" $(requests_since)"
  [[ "$output" != /dev/null ]] && rm -f "$output"
  echo "tool=$label run=$run $out" >> "$results"
  log "$label run $run: $out"
}

# librdkafka's own consumer loop: reads N records of the partition and exits, printing nothing.
run_rdkafka_performance() {  # <run>
  [[ "$RDKAFKA_PERF" == 1 ]] || return 0
  local run="$1" out
  count_requests
  out="$("$helper" run "$work/rdkafka_performance.out" --server "$broker_pid" -- "$rdkafka_performance" -C -t "$TOPIC" \
         -p 0 -b "$bootstrap" -o beginning -c "$N" -q)"
  [[ "$out" == *" exit=0"* ]] || { echo "rdkafka_performance failed: $out" >&2; cat "$work/rdkafka_performance.out" >&2; exit 1; }
  out+=" $(requests_since)"
  echo "tool=rdkafka_perf -C run=$run $out" >> "$results"
  log "rdkafka_performance run $run: $out"
}

run_picomq() {  # <run> <lines|envelope|file>
  local run="$1" variant="$2" dir="$work/picomq-$2-r$1"
  local group="picomq-connect-sink-bench-$variant-r$run" include_metadata=false label="picomq lines"
  [[ "$variant" == envelope ]] && { include_metadata=true; label="picomq envelope"; }
  [[ "$variant" == file ]] && label="picomq lines>file"
  bench_topics_extra="${BENCH_COMMIT_INTERVAL:+offset_commit_interval = \"$BENCH_COMMIT_INTERVAL\"}" \
    bench_write_sink_configs "$dir" libpicomq_connector_stdout_sink "$group" "$TOPIC" "$BATCH_LENGTH" \
    "include_metadata = $include_metadata"
  count_requests
  bench_sink_stdout=/dev/null
  [[ "$variant" == file ]] && bench_sink_stdout="$work/picomq.out"
  bench_server_pid="$broker_pid" bench_run_sink "$dir" "$group" "$TOPIC" "$N" "$label" "$run"
  rm -f "$work/picomq.out"
  sink_result+=" $(requests_since)"
  echo "tool=$label run=$run $sink_result" >> "$results"
  log "$label run $run: $sink_result"
}

# The same lines variant on another build (BENCH_BASELINE): its binary and its plugins.
run_baseline() {  # <run>
  [[ -n "${BENCH_BASELINE:-}" ]] || return 0
  local run="$1" dir="$work/baseline-lines-r$1" bin="$BENCH_BASELINE/bin/picomq-connect" plugins="$BENCH_BASELINE/plugins"
  local group="picomq-connect-sink-bench-baseline-r$run"
  bench_write_sink_configs "$dir" libpicomq_connector_stdout_sink "$group" "$TOPIC" "$BATCH_LENGTH" "include_metadata = false"
  count_requests
  bench_server_pid="$broker_pid" bench_run_sink "$dir" "$group" "$TOPIC" "$N" "baseline lines" "$run"
  sink_result+=" $(requests_since)"
  echo "tool=baseline lines run=$run $sink_result" >> "$results"
  log "baseline lines run $run: $sink_result"
}

# The lines variant with [api] on and a scraper reading /metrics every second (BENCH_API=1).
run_picomq_api() {  # <run>
  [[ "${BENCH_API:-0}" == 1 ]] || return 0
  local run="$1" dir="$work/picomq-api-r$1" group="picomq-connect-sink-bench-api-r$1" port scraper
  port="$(bench_free_port)"
  SINK_RUNTIME_SETTINGS=$'[api]\nenabled = true\nlisten = "127.0.0.1:'"$port"'"' \
    bench_write_sink_configs "$dir" libpicomq_connector_stdout_sink "$group" "$TOPIC" "$BATCH_LENGTH" "include_metadata = false"
  ( while sleep 1; do curl -s -o /dev/null "http://127.0.0.1:$port/metrics" || true; done ) &
  scraper=$!
  bench_run_sink "$dir" "$group" "$TOPIC" "$N" "picomq lines +api" "$run"
  kill "$scraper" 2>/dev/null || true
  wait "$scraper" 2>/dev/null || true
  grep -q "operations API on" "$dir/stderr.log" || { echo "picomq lines +api: the API did not start" >&2; exit 1; }
  echo "tool=picomq lines +api run=$run $sink_result" >> "$results"
  log "picomq lines +api run $run: $sink_result"
}

kcat_plain() { run_kcat "kcat -f" "$1" /dev/null -f '%s\n'; }
kcat_json() { [[ "$KCAT_JSON" == 1 ]] && run_kcat "kcat -J" "$1" /dev/null -J || true; }
# The same two writing a file on disk (BENCH_FILE=1): kcat, single-threaded, pays for the writes.
files() {
  [[ "$FILE_VARIANT" == 1 ]] || return 0
  if (($1 % 2)); then run_kcat "kcat -f>file" "$1" "$work/kcat.out" -f '%s\n'; run_picomq "$1" file
  else run_picomq "$1" file; run_kcat "kcat -f>file" "$1" "$work/kcat.out" -f '%s\n'; fi
}

if [[ "$WARMUP" == 1 ]]; then
  log "warm-up read (untimed)"
  kcat -C -b "$bootstrap" -t "$TOPIC" -o beginning -e -q -f '%s\n' > /dev/null
fi

# The picomq runs end when the helper sees the last commit, polling the broker every 10 ms: what
# those polls cost the broker is measured once and taken out of their broker CPU.
poll_cost="$("$helper" pollcost "$bootstrap" picomq-bench-pollcost "$TOPIC" 3 "$broker_pid")"
log "the helper's polls of the committed offset: $poll_cost"
poll_cpu_s="$(grep -oP 'poll_cpu_s=\K[0-9.e-]+' <<<"$poll_cost")"

for ((r = 1; r <= RUNS; r++)); do
  if ((r % 2)); then kcat_plain "$r"; run_rdkafka_performance "$r"; run_picomq "$r" lines; run_picomq_api "$r"; run_baseline "$r"; kcat_json "$r"; run_picomq "$r" envelope; files "$r"
  else files "$r"; run_picomq "$r" envelope; kcat_json "$r"; run_baseline "$r"; run_picomq_api "$r"; run_picomq "$r" lines; run_rdkafka_performance "$r"; kcat_plain "$r"; fi
done

# ------------------------------------------------------------------ report
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
kcat_version="$(kcat -V 2>&1 | grep -o 'Version [^ ]*\|librdkafka [^ ]*' | tr '\n' ' ' || true)"
python3 "$bench/report.py" "$results" "$N" "$payload_bytes" "$RUNS" \
  "$(nproc) cores, ${cpu_model:-unknown CPU}; kcat ${kcat_version% }; Kafka ${PICOMQ_KAFKA_VERSION}; batch_length=$BATCH_LENGTH; schema=${BENCH_SCHEMA:-json}; offset_commit_interval=${BENCH_COMMIT_INTERVAL:-default}; load average before the consumers $load_start" \
  "$poll_cpu_s"
if [[ "${BENCH_API:-0}" == 1 ]]; then
  python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tool, rest = line.strip().split(" run=", 1)
    f = dict(kv.split("=", 1) for kv in rest.split()[1:])
    rows.setdefault(tool.removeprefix("tool="), []).append(f)
def med(tool, key):
    return statistics.median(float(r[key]) for r in rows[tool])
def cpu(tool):
    return statistics.median(float(r["user_s"]) + float(r["sys_s"]) for r in rows[tool])
off, on = "picomq lines", "picomq lines +api"
print(f"API + /metrics overhead (median of {len(rows[on])} runs): wall {med(off, 'wall_s'):.3f} s off, "
      f"{med(on, 'wall_s'):.3f} s on ({(med(on, 'wall_s') / med(off, 'wall_s') - 1) * 100:+.1f} %); "
      f"CPU {cpu(off):.3f} s off, {cpu(on):.3f} s on ({(cpu(on) / cpu(off) - 1) * 100:+.1f} %)")
PY
fi
