#!/usr/bin/env bash
# Benchmark: picomq-connect (stdout sink, output to /dev/null) vs kcat -C, both consuming the
# same topic of a real single-node Apache Kafka broker, one after the other, R rounds.
# See bench/README.md. Not a test: ctest does not run it.
#
# Environment:
#   BENCH_RECORDS=1000000   records produced into bench.stdout (~205 B JSON each)
#   BENCH_RUNS=3            rounds; each round runs every consumer once (order alternates)
#   BENCH_SKIP_BUILD=0      1: skip scripts/setup.sh + scripts/build.sh (use the existing build/)
#   BENCH_KCAT_JSON=1       0: skip the `kcat -J` (JSON envelope) variant
#   BENCH_WARMUP=1          0: skip the untimed warm-up read before the first round
#   BENCH_BATCH_LENGTH=1000 batch_length of the sink definition
#   BENCH_KEEP=0            1: keep the work dir (broker log, runtime logs, raw results)
#   BENCH_DIR=              work dir (default: a new mktemp -d under /tmp)
# Smoke mode for CI: BENCH_RECORDS=20000 BENCH_RUNS=1 (add BENCH_SKIP_BUILD=1 after a build).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench="$repo/bench"

N="${BENCH_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
KCAT_JSON="${BENCH_KCAT_JSON:-1}"
WARMUP="${BENCH_WARMUP:-1}"
BATCH_LENGTH="${BENCH_BATCH_LENGTH:-1000}"
KEEP="${BENCH_KEEP:-0}"
TOPIC="bench.stdout"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_RECORDS must be a positive integer" >&2; exit 2; }
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_RUNS must be a positive integer" >&2; exit 2; }

work="${BENCH_DIR:-$(mktemp -d /tmp/picomq-bench.XXXXXX)}"
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
[[ -x "$bin" && -f "$plugins/libpicomq_connector_stdout_sink.so" ]] || { echo "no build in $repo/build (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
command -v kcat >/dev/null || { echo "kcat not installed (bash scripts/setup.sh)" >&2; exit 2; }

helper="$work/bench_helper"
# shellcheck disable=SC2046
cc -O2 -Wall -o "$helper" "$bench/bench_helper.c" $(pkg-config --cflags --libs rdkafka)

# ------------------------------------------------------------------ broker
free_port_pair() {  # a port p with p and p+1 free (broker + controller), below the ephemeral
  # range so no client's outgoing connection can take the controller port before it binds
  python3 - <<'PY'
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
}
port="$(free_port_pair)"
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
t0=$(date +%s.%N)
kcat -P -b "$bootstrap" -t "$TOPIC" -l -z none \
  -X linger.ms=20 -X batch.num.messages=10000 -X queue.buffering.max.messages=500000 "$data"
t1=$(date +%s.%N)
end_offset="$("$helper" endoffset "$bootstrap" "$TOPIC" 0)"
log "produced in $(python3 -c "print(f'{$t1-$t0:.1f}')") s; end offset $end_offset"
[[ "$end_offset" == "$N" ]] || { echo "end offset $end_offset != $N records" >&2; exit 1; }
rm -f "$data"   # the page cache is better spent on the broker's log

# ------------------------------------------------------------------ consumers
results="$work/results.txt"
: > "$results"

run_kcat() {  # <label> <run> kcat format args...
  local label="$1" run="$2"; shift 2
  local out
  out="$("$helper" run /dev/null -- kcat -C -b "$bootstrap" -t "$TOPIC" -o beginning -c "$N" -e -q "$@")"
  [[ "$out" == *" exit=0"* ]] || { echo "$label failed: $out" >&2; exit 1; }
  echo "tool=$label run=$run $out" >> "$results"
  log "$label run $run: $out"
}

run_picomq() {  # <run> <lines|envelope>
  local run="$1" variant="$2" dir="$work/picomq-$2-r$1"
  local group="picomq-connect-sink-bench-$variant-r$run" include_metadata=false label="picomq lines"
  [[ "$variant" == envelope ]] && { include_metadata=true; label="picomq envelope"; }
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
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["$TOPIC"]
schema = "json"
batch_length = $BATCH_LENGTH
poll_interval = "100ms"
consumer_group = "$group"
[plugin_config]
include_metadata = $include_metadata
TOML
  local timeout=$((120 + N / 5000)) out
  out="$("$helper" sink "$bootstrap" "$group" "$TOPIC" 0 "$N" "$dir/status.json" /dev/null "$timeout" -- \
          "$bin" --config "$dir/runtime.toml" 2> "$dir/stderr.log")" || true
  [[ "$out" == *" exit=0"* && "$out" != "wall_s=-1"* ]] || { echo "$label run $run failed: $out" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
  out+=" pauses=$(grep -c 'pausing the consumer' "$dir/stderr.log" || true)"
  echo "tool=$label run=$run $out" >> "$results"
  log "$label run $run: $out"
}

kcat_plain() { run_kcat "kcat -f" "$1" -f '%s\n'; }
kcat_json() { [[ "$KCAT_JSON" == 1 ]] && run_kcat "kcat -J" "$1" -J || true; }

if [[ "$WARMUP" == 1 ]]; then
  log "warm-up read (untimed)"
  kcat -C -b "$bootstrap" -t "$TOPIC" -o beginning -e -q -f '%s\n' > /dev/null
fi

for ((r = 1; r <= RUNS; r++)); do
  if ((r % 2)); then kcat_plain "$r"; run_picomq "$r" lines; kcat_json "$r"; run_picomq "$r" envelope
  else run_picomq "$r" envelope; kcat_json "$r"; run_picomq "$r" lines; kcat_plain "$r"; fi
done

# ------------------------------------------------------------------ report
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
kcat_version="$(kcat -V 2>&1 | grep -o 'Version [^ ]*\|librdkafka [^ ]*' | tr '\n' ' ' || true)"
python3 "$bench/report.py" "$results" "$N" "$payload_bytes" "$RUNS" \
  "$(nproc) cores, ${cpu_model:-unknown CPU}; kcat ${kcat_version% }; batch_length=$BATCH_LENGTH"
