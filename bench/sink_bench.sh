#!/usr/bin/env bash
# Benchmark harness shared by every sink: N records of a chosen shape on a real single-node
# Apache Kafka broker, consumed by picomq-connect into a real destination, side by side (same
# run, rotating order) with baselines that load the same data into the same destination with the
# destination's own tools, and optionally a peer system. Every run is checked (the destination
# must hold exactly the N records). See bench/README.md ("sink_bench.sh"). Not a test: ctest
# does not run it.
#
#   BENCH_SINK=postgres bash bench/sink_bench.sh
#
# The sink-specific half is an adapter, bench/sinks/<BENCH_SINK>.sh (interface in bench/README.md
# and at the top of bench/sinks/postgres.sh).
#
# Environment:
#   BENCH_SINK=               adapter name: bench/sinks/<name>.sh (required; e.g. postgres, stdout)
#   BENCH_RECORDS=1000000     records produced into bench.sink.<sink> (gen_records.py)
#   BENCH_RUNS=3              rounds; each round runs every entry once (order rotates per round)
#   BENCH_SHAPE=orders        record shape: orders (~207 B), small (~51 B), wide (~930 B)
#   BENCH_BATCH_LENGTH=1000   batch_length of the sink definition; a comma list (1000,5000,10000)
#                             runs one picomq entry per value in the same rounds
#   BENCH_PEER=0              1: also run the adapter's peer systems (e.g. Kafka Connect), if present
#   BENCH_BASELINES=1         0: leave out the destination's own loaders (bench/peers.sh)
#   BENCH_PEER_LABELS=        with BENCH_PEER=1: only these peers (labels, space-separated; default all)
#   BENCH_SKIP_BUILD=0        1: skip scripts/setup.sh + scripts/build.sh (use the existing build/)
#   BENCH_PICOMQ_BUILD=       another build dir to run picomq-connect and its plugins from (e.g. an
#                             older commit's, to compare two builds; with BENCH_SKIP_BUILD=1)
#   BENCH_KEEP=0              1: keep the work dir (logs, configs, raw results, baseline inputs)
#   BENCH_DIR=                work dir (default: a new mktemp -d under /tmp)
#   BENCH_WRAP=               a command prefix for the timed picomq runs (e.g. "perf record -g -o F --")
#   BENCH_LOG_LEVEL=info      the runtime's log_level (debug: the sinks' per-unit lines, e.g. each insert)
# Adapters read their own knobs (BENCH_PG_PROFILE, ...; see bench/README.md).
# Smoke mode for CI: BENCH_SKIP_BUILD=1 BENCH_RECORDS=20000 BENCH_RUNS=1 BENCH_SINK=postgres.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SINK="${BENCH_SINK:-${1:-}}"
N="${BENCH_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
KEEP="${BENCH_KEEP:-0}"
PEER="${BENCH_PEER:-0}"
bench_shape="${BENCH_SHAPE:-orders}"
IFS=, read -r -a BATCH_LENGTHS <<< "${BENCH_BATCH_LENGTH:-1000}"
bench_require_positive BENCH_RECORDS "$N"
bench_require_positive BENCH_RUNS "$RUNS"
for b in "${BATCH_LENGTHS[@]}"; do bench_require_positive BENCH_BATCH_LENGTH "$b"; done
[[ "$bench_shape" =~ ^(orders|small|wide)$ ]] || { echo "BENCH_SHAPE must be orders, small or wide" >&2; exit 2; }
if [[ -z "$SINK" || ! -f "$bench/sinks/$SINK.sh" ]]; then
  adapters=("$bench"/sinks/*.sh)
  adapters=("${adapters[@]##*/}")
  echo "BENCH_SINK must name an adapter in bench/sinks/: ${adapters[*]%.sh}" >&2
  exit 2
fi
TOPIC="bench.sink.$SINK"

# ------------------------------------------------------------------ adapter defaults + adapter
SINK_PLUGIN=""           # required: the plugin's library name
SINK_DESCRIPTION=""      # one line for the report: what is written, with which config
SINK_VARIANTS=(picomq)   # picomq entries (labels); sink_plugin_config gets the label
SINK_BASELINES=()        # "label|function": function RUN calls bench_timed once
SINK_PEERS=()            # "label|function": function RUN sets peer_result (run with BENCH_PEER=1)
sink_check() { :; }
sink_server_start() { :; }
sink_records_produced() { :; }
sink_reference_loaded() { :; }
sink_notes() { :; }
# shellcheck source=/dev/null
source "$bench/sinks/$SINK.sh"
[[ -n "$SINK_PLUGIN" ]] || { echo "bench/sinks/$SINK.sh does not set SINK_PLUGIN" >&2; exit 2; }
for fn in sink_plugin_config sink_prepare sink_verify; do
  declare -F "$fn" >/dev/null || { echo "bench/sinks/$SINK.sh does not define $fn" >&2; exit 2; }
done

bench_init_workdir "picomq-bench-$SINK" "$KEEP"
chmod 0755 "$work"   # destination servers may run as another user (PostgreSQL as "postgres")

# ------------------------------------------------------------------ build
bench_build "$SKIP_BUILD"
[[ -x "$bin" && -f "$plugins/$SINK_PLUGIN.so" ]] ||
  { echo "no $bin or $plugins/$SINK_PLUGIN.so (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
bench_require_kcat
sink_check
bench_compile_helper

# ------------------------------------------------------------------ broker, destination, data
bench_start_kafka
sink_server_start
bench_create_topic "$TOPIC" 1
bench_produce_records "$TOPIC" "$N" --log-duration
sink_records_produced
rm -f "$records_file"   # the page cache is better spent on the broker's log and the destination

# ------------------------------------------------------------------ entries
results="$work/results.txt"
: > "$results"

# picomq entries: every adapter variant at every batch length. Labels carry /b<len> only when
# BENCH_BATCH_LENGTH lists more than one value.
entries=()     # "kind|label|arg"
for v in "${SINK_VARIANTS[@]}"; do
  for b in "${BATCH_LENGTHS[@]}"; do
    label="$v"
    ((${#BATCH_LENGTHS[@]} > 1)) && label="$v/b$b"
    entries+=("picomq|$label|$v $b")
  done
done
if [[ "${BENCH_BASELINES:-1}" != 0 ]]; then
  for e in "${SINK_BASELINES[@]}"; do entries+=("baseline|${e%%|*}|${e#*|}"); done
fi
if [[ "$PEER" == 1 ]]; then
  if ((${#SINK_PEERS[@]} == 0)); then log "BENCH_PEER=1 but the $SINK adapter has no peer available (see its log lines above)"; fi
  for e in "${SINK_PEERS[@]}"; do
    [[ -z "${BENCH_PEER_LABELS:-}" || " $BENCH_PEER_LABELS " == *" ${e%%|*} "* ]] && entries+=("peer|${e%%|*}|${e#*|}")
  done
fi

run_picomq() {  # <kind: picomq|reference> <label> <variant> <batch_length> <run>
  local kind="$1" label="$2" variant="$3" batch_length="$4" run="$5"
  local dir="$work/${label//\//-}-r$run"
  local group="picomq-connect-sink-bench-$SINK-${label//\//-}-r$run"
  sink_prepare "$kind" "$label" "$run"
  bench_write_sink_configs "$dir" "$SINK_PLUGIN" "$group" "$TOPIC" "$batch_length" \
    "$(sink_plugin_config "$variant" "$run" "$dir")"
  # BENCH_WRAP (e.g. "perf record -g -o F --") wraps the timed runs only, not the untimed reference.
  if [[ "$kind" == reference ]]; then BENCH_WRAP="" bench_run_sink "$dir" "$group" "$TOPIC" "$N" "$label" "$run"
  else bench_run_sink "$dir" "$group" "$TOPIC" "$N" "$label" "$run"; fi
  local verified
  verified="$(sink_verify "$kind" "$label" "$run")" || { echo "$label run $run: verification failed" >&2; exit 1; }
  entry_result="$sink_result batch_length=$batch_length $verified"
}

run_entry() {  # <kind|label|arg> <run>
  local kind="${1%%|*}" rest="${1#*|}" run="$2"
  local label="${rest%%|*}" arg="${rest#*|}" verified load1
  load1="$(cut -d' ' -f1 /proc/loadavg)"   # the machine's 1-min load average as the run starts
  case "$kind" in
    picomq)
      # shellcheck disable=SC2086  # "variant batch_length": two words on purpose
      run_picomq picomq "$label" $arg "$run" ;;
    baseline)
      sink_prepare baseline "$label" "$run"
      "$arg" "$run"
      verified="$(sink_verify baseline "$label" "$run")" || { echo "$label run $run: verification failed" >&2; exit 1; }
      entry_result="$timed_result $verified" ;;
    peer)
      sink_prepare peer "$label" "$run"
      peer_result=""
      "$arg" "$run"
      verified="$(sink_verify peer "$label" "$run")" || { echo "$label run $run: verification failed" >&2; exit 1; }
      entry_result="$peer_result $verified" ;;
  esac
  entry_result+=" load1=$load1"
  echo "entry=$label kind=$kind run=$run $entry_result" >> "$results"
  log "$label run $run: $entry_result"
}

# The reference load (untimed, also the warm-up of broker, runtime and destination): the first
# picomq entry once. The adapter then derives its baselines' inputs from what the sink wrote, so
# the baselines load exactly the rows the sink writes.
first="${entries[0]#*|}"
log "reference load (untimed): ${first%%|*}"
# shellcheck disable=SC2086  # "variant batch_length": two words on purpose
run_picomq reference "${first%%|*}" ${first#*|} 0
log "reference load: $entry_result"
echo "entry=reference kind=reference run=0 $entry_result" >> "$work/reference.txt"
sink_reference_loaded

for ((r = 1; r <= RUNS; r++)); do
  # Round r starts with entry (r-1) mod count and goes on in list order.
  for ((i = 0; i < ${#entries[@]}; i++)); do
    run_entry "${entries[$(((r - 1 + i) % ${#entries[@]}))]}" "$r"
  done
done

# ------------------------------------------------------------------ report
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
note="$(nproc) cores, ${cpu_model:-unknown CPU}; shape $bench_shape; batch_length ${BATCH_LENGTHS[*]}"
sink_notes > "$work/notes.txt"
python3 "$bench/sink_report.py" "$results" "$N" "$payload_bytes" "$RUNS" "$SINK" "$SINK_DESCRIPTION" "$note" \
  "$work/notes.txt" "${SINK_TARGET:-}" | tee "$work/report.txt"
