#!/usr/bin/env bash
# Crash-recovery benchmark of the PostgreSQL sink (insert mode, the defaults): N records on a
# real Kafka broker, a load into a real PostgreSQL 15 killed with SIGKILL part-way, a restart with
# the same consumer group (static membership, so no session timeout to wait out), and then:
#   - the replayed window: rows the table held at the kill beyond the committed offset, which
#     the restart reads again, and how fast the restart gets past it (rows/s) against the rate
#     of the load before the kill;
#   - failed write attempts after the restart: the runtime's "failed (attempt" log lines and the
#     sink's failed_writes counter in the status file (both must be 0), and its replay counters;
#   - the table: every record exactly once (count, distinct pico_offset, min, max).
# See bench/README.md ("postgres_replay.sh"). Not a test: ctest does not run it.
#
#   bash bench/postgres_replay.sh                                   # 1M records, kill at 50 %
#   BENCH_SKIP_BUILD=1 BENCH_RECORDS=20000 bash bench/postgres_replay.sh   # smoke (CI), ~30 s
#
# Environment:
#   BENCH_RECORDS=1000000     records produced into bench.replay (one partition)
#   BENCH_KILL_AT=50          kill once the committed offset reaches this percentage of N
#   BENCH_KILL_TRIES=5        kills (each 2.5 % of N further on) until one leaves a replay window
#   BENCH_BATCH_LENGTH=1000   batch_length of the sink definition
#   BENCH_SKIP_BUILD=0        1: use the existing build/
#   BENCH_KEEP=0              1: keep the work dir (logs, configs, status files)
#   BENCH_DIR=                work dir (default: a new mktemp -d under /tmp)
# Exits 1 when a check fails (a failed attempt, a row missing or doubled).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N="${BENCH_RECORDS:-1000000}"
KILL_AT="${BENCH_KILL_AT:-50}"
BATCH_LENGTH="${BENCH_BATCH_LENGTH:-1000}"
bench_require_positive BENCH_RECORDS "$N"
bench_require_positive BENCH_KILL_AT "$KILL_AT"
bench_require_positive BENCH_BATCH_LENGTH "$BATCH_LENGTH"
((KILL_AT < 100)) || { echo "BENCH_KILL_AT must be below 100" >&2; exit 2; }
TOPIC=bench.replay
GROUP=picomq-connect-sink-bench-replay
BATCH_LENGTHS=("$BATCH_LENGTH")
# The postgres adapter of sink_bench.sh brings the server, psql and the plugin config.
# shellcheck source=bench/sinks/postgres.sh
source "$bench/sinks/postgres.sh"

bench_init_workdir picomq-bench-replay "${BENCH_KEEP:-0}"
chmod 0755 "$work"
bench_build "${BENCH_SKIP_BUILD:-0}"
[[ -x "$bin" && -f "$plugins/$SINK_PLUGIN.so" ]] || { echo "no $bin or $SINK_PLUGIN.so (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
bench_require_kcat
sink_check
bench_compile_helper
bench_start_kafka
sink_server_start
bench_create_topic "$TOPIC" 1
bench_produce_records "$TOPIC" "$N" --log-duration
rm -f "$records_file"
pg_sql "$PG_DB" "DROP TABLE IF EXISTS $PG_TABLE" "CHECKPOINT"

# The runtime config of bench_write_runtime_config plus static membership: the restarted
# runtime takes the killed one's place in the group at once.
dir="$work/run"
bench_write_sink_configs "$dir" "$SINK_PLUGIN" "$GROUP" "$TOPIC" "$BATCH_LENGTH" "$(sink_plugin_config picomq 0 "$dir")"
sed -i 's/^\[broker\]$/[broker]\ngroup_instance_id = "bench-replay"/' "$dir/runtime.toml"
sed -i 's/^poll_interval = .*/&\nproperties = { "session.timeout.ms" = "6000" }/' "$dir/sinks.d/bench.toml"

# committed: the group's committed offset on TOPIC[0] (-1 when none), from Kafka's own tool.
committed() {
  java -Xshare:auto -XX:TieredStopAtLevel=1 -cp "$repo/tools/kafka/libs/*" \
    org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$bootstrap" \
    --describe --group "$GROUP" 2>/dev/null | awk -v t="$TOPIC" '$2 == t && $3 == 0 {print ($4 ~ /^[0-9]+$/ ? $4 : -1)}'
}
rows() { pg_sql "$PG_DB" "SELECT count(*) FROM $PG_TABLE"; }
now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.3f}')"; }

# ------------------------------------------------------------------ the load, killed part-way
# A SIGKILL leaves a window only when it falls after a segment's COMMIT and before the runtime's
# offset commit for it, milliseconds later. The sink logs each commit (at debug) before it
# completes the segment's writes, so the first load runs at debug level and is killed on the
# first such line once the committed offset has reached the target: that segment's offsets
# cannot be committed yet, unless the runtime beats the kill by a few milliseconds. Up to
# BENCH_KILL_TRIES kills, each a few % further on, until one leaves a window. The rate before
# the kill is the first run's.
kill_at=$((N * KILL_AT / 100))
step=$((N / 40 > 0 ? N / 40 : 1))
window=0 tries=0 load1_rate=""
sed -i 's/^log_level = "info"$/log_level = "debug"/' "$dir/runtime.toml"
while ((window <= 0 && tries < ${BENCH_KILL_TRIES:-5})); do
  tries=$((tries + 1))
  target=$((kill_at + (tries - 1) * step))
  ((target < N)) || break
  log "load 1 (try $tries): until $target records are committed, then SIGKILL at the next segment's COMMIT"
  load_log="$dir/load1-$tries.log"
  : > "$load_log"
  t_start="$(now)"
  "$bin" --config "$dir/runtime.toml" > /dev/null 2> "$load_log" &
  pid=$!
  "$helper" waitcommitted "$bootstrap" $((120 + N / 5000)) "$GROUP" "$TOPIC" "$target" > /dev/null ||
    { tail -20 "$load_log" >&2; exit 1; }
  # The next commit line (tail follows the log through inotify: the kill comes within a few ms).
  # While records flow a segment commits at least every commit_interval (1 s); none within 3 s:
  # the load is over (a small N), and the kill leaves no window.
  exec {commits}< <(exec tail -n 0 -F "$load_log" 2>/dev/null)
  follower=$!
  timeout 3 grep -m1 -q 'rows of [0-9]* batches in one COPY' <&"$commits" || true
  t_kill="$(now)"
  kill -9 "$pid" 2>/dev/null || true
  kill "$follower" 2>/dev/null || true
  exec {commits}<&-
  wait "$pid" 2>/dev/null || true
  at_kill_rows="$(rows)"
  at_kill_committed="$(committed)"
  window=$((at_kill_rows - at_kill_committed))
  [[ -n "$load1_rate" ]] || load1_rate="$(python3 -c "print(round($at_kill_committed / ($t_kill - $t_start)))")"
  log "killed after $(elapsed "$t_start" "$t_kill") s: $at_kill_rows rows in the table, $at_kill_committed committed: a replay window of $window rows"
done
sed -i 's/^log_level = "debug"$/log_level = "info"/' "$dir/runtime.toml"

# ------------------------------------------------------------------ the restart
log "load 2: restart with the same group"
t1="$(now)"
"$bin" --config "$dir/runtime.toml" > /dev/null 2> "$dir/load2.log" &
pid=$!
"$helper" waitcommitted "$bootstrap" 120 "$GROUP" "$TOPIC" "$at_kill_rows" > /dev/null ||
  { tail -20 "$dir/load2.log" >&2; kill "$pid"; exit 1; }
t_window="$(now)"
"$helper" waitcommitted "$bootstrap" $((120 + N / 5000)) "$GROUP" "$TOPIC" "$N" > /dev/null ||
  { tail -20 "$dir/load2.log" >&2; kill "$pid"; exit 1; }
t_end="$(now)"
sleep 1.5   # the status file is rewritten once a second
status_counters="$(python3 - "$dir/status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = s["sinks"][0].get("counters", {})
print(" ".join(f"{k}={c.get(k, 0)}" for k in ("failed_writes", "conflict_redos", "already_written_records", "destination_unreachable")))
PY
)"
kill -TERM "$pid"
wait "$pid" || true
failed_attempts="$(grep -c 'failed (attempt' "$dir/load2.log" || true)"
table="$(pg_sql "$PG_DB" "SELECT count(*) || ' ' || count(DISTINCT pico_offset) || ' ' || min(pico_offset) || ' ' || max(pico_offset) FROM $PG_TABLE")"

window_s="$(elapsed "$t1" "$t_window")"
# The moment the restarted runtime got its partition (its log's local timestamps): the window's
# rate without the process start and the group join.
assigned_at="$(python3 - "$dir/load2.log" <<'PY'
import datetime, re, sys
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+) .*: assigned ", line)
    if m:
        print(datetime.datetime.fromisoformat(m.group(1)).timestamp())
        break
PY
)"
join_s="$(elapsed "$t1" "${assigned_at:-$t1}")"
window_rate_joined="$(python3 -c "print(round(max($window, 1) / max($t_window - ${assigned_at:-$t1}, 1e-3)))")"
window_rate="$(python3 -c "print(round(max($window, 1) / max($t_window - $t1, 1e-3)))")"
rest_rate="$(python3 -c "print(round(($N - $at_kill_rows) / max($t_end - $t_window, 1e-3)))")"
echo
echo "== postgres_replay: $N records, batch_length $BATCH_LENGTH, SIGKILL at $KILL_AT % ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "load before the kill:   $load1_rate records/s (the first run, process start and group join included); $tries kill(s)"
echo "replayed window:        $window rows (table $at_kill_rows, committed $at_kill_committed)"
if ((window > 0)); then
  echo "restart to past it:     $window_s s: $window_rate rows/s of the window (process start and group join included);"
  echo "                        from the assignment ($join_s s after start): $window_rate_joined rows/s"
else
  echo "restart to past it:     no window: the kill fell between an offset commit and the next write (run again for one)"
fi
echo "after the window:       $((N - at_kill_rows)) records in $(elapsed "$t_window" "$t_end") s: $rest_rate records/s"
echo "failed write attempts:  $failed_attempts (runtime log); sink counters: $status_counters"
echo "table:                  $table (count, distinct pico_offset, min, max)"
[[ "$failed_attempts" == 0 && "$status_counters" == "failed_writes=0 "* ]] ||
  { echo "FAILED: write attempts failed after the restart (see $dir/load2.log)" >&2; exit 1; }
[[ "$table" == "$N $N 0 $((N - 1))" ]] || { echo "FAILED: the table does not hold every record once" >&2; exit 1; }
echo "ok: no failed attempt, every record once"
