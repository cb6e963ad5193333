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
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench="$repo/bench"

N="${BENCH_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
BATCH_LENGTH="${BENCH_BATCH_LENGTH:-1000}"
EXPORT_REPS="${BENCH_EXPORT_REPS:-5}"
WARMUP="${BENCH_WARMUP:-1}"
KEEP="${BENCH_KEEP:-0}"
TOPIC="bench.planes"
PLANES=(rows batches arrow)
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_RECORDS must be a positive integer" >&2; exit 2; }
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_RUNS must be a positive integer" >&2; exit 2; }
[[ "$BATCH_LENGTH" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_BATCH_LENGTH must be a positive integer" >&2; exit 2; }
[[ "$EXPORT_REPS" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_EXPORT_REPS must be a positive integer" >&2; exit 2; }

work="${BENCH_DIR:-$(mktemp -d /tmp/picomq-bench-planes.XXXXXX)}"
mkdir -p "$work"
broker_dir="$work/kafka"
log() { printf '[bench %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

cleanup() {
  local rc=$?
  "$repo/tests/servers/kafka.sh" stop "$broker_dir" >/dev/null 2>&1 || true
  if [[ "$KEEP" == 1 || $rc -ne 0 ]]; then
    log "work dir kept: $work"
  else
    rm -rf "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ build
if [[ "$SKIP_BUILD" != 1 ]]; then
  log "setup + build"
  bash "$repo/scripts/setup.sh" >&2
  bash "$repo/scripts/build.sh" >&2
fi
bin="$repo/build/bin/picomq-connect"
plugins="$repo/build/plugins"
export_bench="$repo/build/bench/plugins/bench_arrow_export"
[[ -x "$bin" && -x "$export_bench" ]] || { echo "no build in $repo/build (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
for plane in "${PLANES[@]}"; do
  [[ -f "$plugins/libpicomq_connector_bench_${plane}_sink.so" ]] ||
    { echo "no $plugins/libpicomq_connector_bench_${plane}_sink.so (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
done
command -v kcat >/dev/null || { echo "kcat not installed (bash scripts/setup.sh)" >&2; exit 2; }

helper="$work/bench_helper"
# shellcheck disable=SC2046
cc -O2 -Wall -o "$helper" "$bench/bench_helper.c" $(pkg-config --cflags --libs rdkafka)

# ------------------------------------------------------------------ broker
# A port p with p and p+1 free (broker + controller), below the ephemeral range (as in
# stdout_vs_kcat.sh).
port="$(python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close(); continue
    try:
        t = socket.socket(); t.bind(("127.0.0.1", p + 1)); t.close(); s.close(); print(p); break
    except OSError:
        s.close()
PY
)"
[[ -n "$port" ]] || { echo "no free port pair found" >&2; exit 1; }
bootstrap="127.0.0.1:$port"
log "starting Kafka on $bootstrap (dir $broker_dir)"
"$repo/tests/servers/kafka.sh" start "$broker_dir" "$port" >&2

log "creating topic $TOPIC (1 partition)"
java -Xshare:auto -XX:TieredStopAtLevel=1 -cp "$repo/tools/kafka/libs/*" org.apache.kafka.tools.TopicCommand \
  --bootstrap-server "$bootstrap" --create --topic "$TOPIC" --partitions 1 --replication-factor 1 \
  > "$work/topic.log" 2>&1 || { cat "$work/topic.log" >&2; exit 1; }

# ------------------------------------------------------------------ data
data="$work/records.jsonl"
log "generating $N records"
python3 "$bench/gen_records.py" "$N" "$data" >&2
file_bytes=$(stat -c %s "$data")
payload_bytes=$((file_bytes - N))   # one '\n' per record is not part of the payload

log "producing into $TOPIC"
kcat -P -b "$bootstrap" -t "$TOPIC" -l -z none \
  -X linger.ms=20 -X batch.num.messages=10000 -X queue.buffering.max.messages=500000 "$data"
end_offset="$("$helper" endoffset "$bootstrap" "$TOPIC" 0)"
[[ "$end_offset" == "$N" ]] || { echo "end offset $end_offset != $N records" >&2; exit 1; }

# ------------------------------------------------------------------ export cost (no Kafka)
log "timing the arrow export alone (bench_arrow_export, $EXPORT_REPS repetitions)"
"$export_bench" "$data" "$BATCH_LENGTH" "$EXPORT_REPS" > "$work/export.txt"
cat "$work/export.txt" >&2
rm -f "$data"   # the page cache is better spent on the broker's log

# ------------------------------------------------------------------ the planes
results="$work/results.txt"
: > "$results"

run_plane() {  # <round> <rows|batches|arrow>
  local run="$1" plane="$2" dir="$work/$2-r$1"
  local group="picomq-connect-sink-bench-planes-$plane-r$run" report="$dir/report.txt"
  mkdir -p "$dir/sinks.d"
  cat > "$dir/runtime.toml" <<TOML
[broker]
bootstrap_servers = "$bootstrap"
[plugins]
path = ["$plugins"]
[sinks]
dir = "sinks.d"
[runtime]
status_file = "$dir/status.json"
log_level = "info"
TOML
  cat > "$dir/sinks.d/bench.toml" <<TOML
type = "sink"
key = "bench"
path = "libpicomq_connector_bench_${plane}_sink"
[[topics]]
topics = ["$TOPIC"]
schema = "json"
batch_length = $BATCH_LENGTH
poll_interval = "100ms"
consumer_group = "$group"
[plugin_config]
report_path = "$report"
TOML
  local timeout=$((120 + N / 5000)) out line
  out="$("$helper" sink "$bootstrap" "$group" "$TOPIC" 0 "$N" "$dir/status.json" /dev/null "$timeout" -- \
          "$bin" --config "$dir/runtime.toml" 2> "$dir/stderr.log")" || true
  [[ "$out" == *" exit=0"* && "$out" != "wall_s=-1"* ]] || { echo "$plane run $run failed: $out" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
  # The sink's own count, written on close (after SIGTERM, once the last offset is committed).
  line="$(cat "$report" 2>/dev/null || true)"
  [[ "$line" =~ ^records=([0-9]+)\ bytes=([0-9]+)\ checksum=([0-9]+)$ ]] ||
    { echo "$plane run $run: no report line in $report (got '$line')" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
  [[ "${BASH_REMATCH[1]}" == "$N" ]] ||
    { echo "$plane run $run: the sink counted ${BASH_REMATCH[1]} records, not $N" >&2; exit 1; }
  if [[ "$plane" != arrow && "${BASH_REMATCH[2]}" != "$payload_bytes" ]]; then
    echo "$plane run $run: the sink read ${BASH_REMATCH[2]} payload bytes, not $payload_bytes" >&2; exit 1
  fi
  out+=" pauses=$(grep -c 'pausing the consumer' "$dir/stderr.log" || true)"
  out+=" sink_records=${BASH_REMATCH[1]} sink_bytes=${BASH_REMATCH[2]} sink_checksum=${BASH_REMATCH[3]}"
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
