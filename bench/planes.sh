#!/usr/bin/env bash
# Benchmark: the same records through one counting sink on each data plane (rows, batches,
# arrow), all reading the same topic of a real single-node Apache Kafka broker, one after the
# other, R rounds; plus the arrow export step timed alone (bench_arrow_export).
# See bench/README.md. Not a test: ctest does not run it.
#
# Environment:
#   BENCH_RECORDS=1000000   records produced into bench.planes (~207 B JSON each, gen_records.py)
#   BENCH_RUNS=3            rounds; each round runs every plane once (order rotates)
#   BENCH_SKIP_BUILD=0      1: skip scripts/setup.sh + scripts/build.sh (use the existing build/)
#   BENCH_BATCH_LENGTH=1000 batch_length of the sink definition (and of the export benchmark)
#   BENCH_EXPORT_REPS=5     repetitions of the export benchmark (median)
#   BENCH_WARMUP=1          0: skip the untimed warm-up read before the first round
#   BENCH_KEEP=0            1: keep the work dir (broker log, runtime logs, raw results)
#   BENCH_DIR=              work dir (default: a new mktemp -d under /tmp)
# Smoke mode for CI: BENCH_RECORDS=20000 BENCH_RUNS=1 (add BENCH_SKIP_BUILD=1 after a build).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N="${BENCH_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
BATCH_LENGTH="${BENCH_BATCH_LENGTH:-1000}"
EXPORT_REPS="${BENCH_EXPORT_REPS:-5}"
WARMUP="${BENCH_WARMUP:-1}"
KEEP="${BENCH_KEEP:-0}"
TOPIC="bench.planes"
PLANES=(rows batches arrow)
bench_require_positive BENCH_RECORDS "$N"
bench_require_positive BENCH_RUNS "$RUNS"
bench_require_positive BENCH_BATCH_LENGTH "$BATCH_LENGTH"
bench_require_positive BENCH_EXPORT_REPS "$EXPORT_REPS"

bench_init_workdir picomq-bench-planes "$KEEP"

# ------------------------------------------------------------------ build
bench_build "$SKIP_BUILD"
export_bench="$repo/build/bench/plugins/bench_arrow_export"
[[ -x "$bin" && -x "$export_bench" ]] || { echo "no build in $repo/build (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
for plane in "${PLANES[@]}"; do
  [[ -f "$plugins/libpicomq_connector_bench_${plane}_sink.so" ]] ||
    { echo "no $plugins/libpicomq_connector_bench_${plane}_sink.so (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
done
bench_require_kcat
bench_compile_helper

# ------------------------------------------------------------------ broker + data
bench_start_kafka
bench_create_topic "$TOPIC" 1
bench_produce_records "$TOPIC" "$N"

# ------------------------------------------------------------------ export cost (no Kafka)
log "timing the arrow export alone (bench_arrow_export, $EXPORT_REPS repetitions)"
"$export_bench" "$records_file" "$BATCH_LENGTH" "$EXPORT_REPS" > "$work/export.txt"
cat "$work/export.txt" >&2
rm -f "$records_file"   # the page cache is better spent on the broker's log

# ------------------------------------------------------------------ the planes
results="$work/results.txt"
: > "$results"

run_plane() {  # <round> <rows|batches|arrow>
  local run="$1" plane="$2" dir="$work/$2-r$1"
  local group="picomq-connect-sink-bench-planes-$plane-r$run" report="$dir/report.txt"
  bench_write_sink_configs "$dir" "libpicomq_connector_bench_${plane}_sink" "$group" "$TOPIC" "$BATCH_LENGTH" \
    "report_path = \"$report\""
  bench_run_sink "$dir" "$group" "$TOPIC" "$N" "$plane" "$run"
  # The sink's own count, written on close (after SIGTERM, once the last offset is committed).
  local line
  line="$(cat "$report" 2>/dev/null || true)"
  [[ "$line" =~ ^records=([0-9]+)\ bytes=([0-9]+)\ checksum=([0-9]+)$ ]] ||
    { echo "$plane run $run: no report line in $report (got '$line')" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
  [[ "${BASH_REMATCH[1]}" == "$N" ]] ||
    { echo "$plane run $run: the sink counted ${BASH_REMATCH[1]} records, not $N" >&2; exit 1; }
  if [[ "$plane" != arrow && "${BASH_REMATCH[2]}" != "$payload_bytes" ]]; then
    echo "$plane run $run: the sink read ${BASH_REMATCH[2]} payload bytes, not $payload_bytes" >&2; exit 1
  fi
  local out="$sink_result sink_records=${BASH_REMATCH[1]} sink_bytes=${BASH_REMATCH[2]} sink_checksum=${BASH_REMATCH[3]}"
  echo "plane=$plane run=$run $out" >> "$results"
  log "$plane run $run: $out"
}

if [[ "$WARMUP" == 1 ]]; then
  log "warm-up read (untimed)"
  kcat -C -b "$bootstrap" -t "$TOPIC" -o beginning -e -q -f '%s\n' > /dev/null
fi

for ((r = 1; r <= RUNS; r++)); do
  for ((i = 0; i < ${#PLANES[@]}; i++)); do   # round r starts with plane (r-1) mod 3
    run_plane "$r" "${PLANES[$(((r - 1 + i) % ${#PLANES[@]}))]}"
  done
done

# ------------------------------------------------------------------ report
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
python3 "$bench/planes_report.py" "$results" "$work/export.txt" "$N" "$payload_bytes" "$RUNS" \
  "$(nproc) cores, ${cpu_model:-unknown CPU}; batch_length=$BATCH_LENGTH"
