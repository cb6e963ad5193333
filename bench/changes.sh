#!/usr/bin/env bash
# Change events into PostgreSQL: picomq-connect (the postgres sink, changes = "debezium") against
# Kafka Connect with the Debezium JDBC sink, on the same topic of real Debezium change events,
# side by side in rounds. See bench/README.md ("Change events"). Not a test: ctest does not run it.
#
#   BENCH_SKIP_BUILD=1 bash bench/changes.sh
#
# What it does:
#   1. a Kafka broker (bench/lib.sh), a source PostgreSQL 15 with wal_level = logical
#      (PICOMQ_PG_CONF, as tests/changes does) and a destination PostgreSQL 15 for the replicas
#      (sinks/postgres/server.sh each; stopped on exit);
#   2. Debezium's PostgreSQL connector 3.6.1.Final in a Kafka Connect standalone worker captures the
#      source table items(id int primary key, name text, qty int, price double precision, note
#      text NULL) into one topic, JsonConverter with schemas for keys and values. The workload is
#      set-based SQL in blocks of keys: inserts, updates (three per key, one from a later block),
#      deletes (each also a tombstone) and re-inserts of deleted keys, ~BENCH_RECORDS events in all;
#      its first event is the snapshot of a sentinel row (id 0) and its last an update of it. Once
#      the topic's end offset is the count of events the statements made, the worker is stopped:
#      both sinks read a finished topic;
#   3. BENCH_RUNS rounds, the order alternating: picomq-connect (bench/changes_picomq.sh) into
#      database replica_picomq, Kafka Connect (bench/peers/kafka_connect_jdbc_changes.sh) into
#      database replica_kafka_connect, each database fresh per round. Each from process start until
#      its replica equals the source (bench/peers/changes_lib.sh: the sentinel's last change seen,
#      then the checksum of the table); the CPU of its process tree, its peak RSS, the destination
#      server's CPU over the same time (bench/peers/peer_lib.sh, for both);
#   4. one table (bench/changes_report.py): medians, picomq / Kafka Connect, the load average before
#      and after. Every replica is compared with the source again afterwards; the script exits 1
#      when one differs (the differing rows are in the work dir, which is then kept).
#
# Environment:
#   BENCH_RECORDS=1000000     change events to produce, about (the statements' exact count is used)
#   BENCH_RUNS=3              rounds; odd rounds run picomq first, even rounds Kafka Connect first
#   BENCH_BATCH_LENGTH=1000   picomq's batch_length, and the connector's batch.size and the worker's
#                             max.poll.records unless KC_BATCH_SIZE / KC_MAX_POLL_RECORDS say otherwise
#   BENCH_ENTRIES="picomq kafka-connect"   the entries to run (one of them to look at it alone)
#   BENCH_SKIP_BUILD=0        1: skip scripts/setup.sh + scripts/build.sh (use the existing build/)
#   BENCH_PICOMQ_BUILD=       another build dir to run picomq-connect and its plugins from
#   BENCH_KEEP=0              1: keep the work dir (logs, configs, the source's rows)
#   BENCH_DIR=                work dir (default: a new mktemp -d under /tmp)
#   BENCH_LOG_LEVEL=info      the runtime's log_level
#   KC_REDUCTION_BUFFER=true, KC_BATCH_SIZE, KC_MAX_POLL_RECORDS, KC_HEAP_OPTS, KC_JVM_OPTS, ...:
#                             the peer's (bench/peers/kafka_connect_jdbc_changes.sh)
#   PEER_POLL_MS=150, PEER_TIMEOUT_S, CHANGES_SETTLE_S=20: the runners' (peer_lib.sh, changes_lib.sh)
# Smoke mode for CI: BENCH_SKIP_BUILD=1 BENCH_RECORDS=20000 BENCH_RUNS=1 bash bench/changes.sh
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=bench/peers/changes_lib.sh
source "$bench/peers/changes_lib.sh"   # changes_checksum_sql: the one checksum of source and replicas

N_TARGET="${BENCH_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
KEEP="${BENCH_KEEP:-0}"
BATCH_LENGTH="${BENCH_BATCH_LENGTH:-1000}"
read -r -a ENTRIES <<< "${BENCH_ENTRIES:-picomq kafka-connect}"
bench_require_positive BENCH_RECORDS "$N_TARGET"
bench_require_positive BENCH_RUNS "$RUNS"
bench_require_positive BENCH_BATCH_LENGTH "$BATCH_LENGTH"
((N_TARGET >= 1000)) || { echo "BENCH_RECORDS must be at least 1000" >&2; exit 2; }
for e in "${ENTRIES[@]}"; do
  [[ "$e" == picomq || "$e" == kafka-connect ]] || { echo "BENCH_ENTRIES: picomq and/or kafka-connect, not $e" >&2; exit 2; }
done
export KC_BATCH_SIZE="${KC_BATCH_SIZE:-$BATCH_LENGTH}"
export KC_REDUCTION_BUFFER="${KC_REDUCTION_BUFFER:-true}"
PG_BIN=/usr/lib/postgresql/15/bin
TOPIC=bench.public.items          # Debezium's name: <topic.prefix>.<schema>.<table>
SOURCE_DB=shop
TABLE=items
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"

bench_init_workdir picomq-bench-changes "$KEEP"
chmod 0755 "$work"   # the PostgreSQL servers run as the "postgres" user

# ------------------------------------------------------------------ build, prerequisites
bench_build "$SKIP_BUILD"
[[ -x "$bin" && -f "$plugins/libpicomq_connector_postgres_sink.so" ]] ||
  { echo "no $bin or $plugins/libpicomq_connector_postgres_sink.so (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
[[ -x "$PG_BIN/initdb" ]] || { echo "no $PG_BIN/initdb: run scripts/setup.sh (postgresql-15)" >&2; exit 2; }
command -v psql >/dev/null || { echo "no psql: run scripts/setup.sh (postgresql-15)" >&2; exit 2; }
command -v java >/dev/null || { echo "no java: run scripts/setup.sh (openjdk-17)" >&2; exit 2; }
bench_compile_helper
kc_fetch="$repo/tools/kafka-connect/fetch-kafka-connect.sh"
bash "$kc_fetch" >&2 || { echo "cannot fetch the Kafka Connect jars ($kc_fetch)" >&2; exit 1; }
kc_libs="$(bash "$kc_fetch" --print-dir)"
[[ -d "$kc_libs/plugins/debezium-connector-postgres" && -d "$kc_libs/plugins/debezium-connector-jdbc" ]] ||
  { echo "no Debezium connectors in $kc_libs/plugins ($kc_fetch)" >&2; exit 1; }

# psql_at PORT DB SQL...: runs SQL (psql -c each), prints tuples unaligned; exits 1 on an error.
psql_at() {
  local port="$1" db="$2" args=() s
  shift 2
  for s in "$@"; do args+=(-c "$s"); done
  PGOPTIONS='-c client_min_messages=warning' \
    psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" "${args[@]}" ||
    { echo "psql failed on 127.0.0.1:$port/$db: $*" >&2; exit 1; }
}

# pg_start DIR CONF: a PostgreSQL 15 server in DIR on a free port (PICOMQ_PG_CONF=CONF); sets pg_port.
pg_start() {
  pg_port="$(bench_free_port)"
  [[ -n "$pg_port" ]] || { echo "no free port for PostgreSQL" >&2; exit 1; }
  bench_cleanup_hooks+=("'$repo/sinks/postgres/server.sh' stop '$1'")
  # Owner pid $$: the server's watchdog stops it should this script die without its trap.
  PICOMQ_PG_CONF="$2" "$repo/sinks/postgres/server.sh" start "$1" "$pg_port" "$$" >&2
}

# ------------------------------------------------------------------ broker, servers
bench_start_kafka
bench_create_topic "$TOPIC" 1

log "starting the source PostgreSQL (wal_level = logical) and the replicas' PostgreSQL"
pg_start "$work/pg-source" $'wal_level = logical\nmax_replication_slots = 4\nmax_wal_senders = 4'
src_port="$pg_port"
pg_start "$work/pg-replica" ""
dst_port="$pg_port"
# As bench/sinks/postgres.sh: no autovacuum (it would work on one entry's table during the next
# entry's run and its CPU would count as the server's), and a WAL budget large enough that no
# checkpoint starts inside a run (each run starts after a CHECKPOINT).
psql_at "$dst_port" postgres "ALTER SYSTEM SET autovacuum = off" "ALTER SYSTEM SET max_wal_size = '8GB'" \
  "SELECT pg_reload_conf()" > /dev/null
bench_server_pid="$(head -1 "$work/pg-replica/data/postmaster.pid")"
[[ "$bench_server_pid" =~ ^[0-9]+$ ]] || { echo "no postmaster pid in $work/pg-replica/data/postmaster.pid" >&2; exit 1; }

# ------------------------------------------------------------------ the source and its capture
psql_at "$src_port" postgres "CREATE DATABASE $SOURCE_DB"
# Types both sinks write as they are: int, text, double precision (numeric is not a type the
# postgres sink's columns mode writes; docs/sinks/postgres-encoding.md, "Type mapping").
psql_at "$src_port" "$SOURCE_DB" \
  "CREATE TABLE $TABLE (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL, price double precision NOT NULL, note text)" \
  "INSERT INTO $TABLE VALUES (0, 'sentinel', 0, 0, NULL)"

dbz="$work/debezium"
mkdir -p "$dbz/plugins"
ln -s "$kc_libs/plugins/debezium-connector-postgres" "$dbz/plugins/debezium-connector-postgres"
cat > "$dbz/worker.properties" <<PROPS
bootstrap.servers=$bootstrap
# Kafka Connect's JsonConverter with schemas, for keys and values: the Debezium JDBC sink needs the
# schemas; picomq's changes = "debezium" takes the {"schema", "payload"} wrapper off.
key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=true
offset.storage.file.filename=$dbz/connect.offsets
offset.flush.interval.ms=1000
plugin.path=$dbz/plugins
plugin.discovery=service_load
listeners=http://127.0.0.1:0
producer.linger.ms=20
PROPS
cat > "$dbz/connector.properties" <<PROPS
name=bench-changes-source
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
database.hostname=127.0.0.1
database.port=$src_port
database.user=postgres
database.password=unused
database.dbname=$SOURCE_DB
topic.prefix=bench
plugin.name=pgoutput
slot.name=bench_changes
publication.name=bench_changes
publication.autocreate.mode=filtered
table.include.list=public.$TABLE
# The snapshot reads the sentinel row (the topic's first event): once it is on the topic the slot
# exists and streaming follows, so no statement of the workload is missed.
snapshot.mode=initial
# Larger queues than the defaults (2048 / 8192): the capture is not timed, only waited for.
max.batch.size=8192
max.queue.size=32768
PROPS
cat > "$dbz/log4j2.properties" <<L4J
rootLogger.level=INFO
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
L4J
log "starting Debezium's PostgreSQL connector (Kafka Connect standalone) on $SOURCE_DB.$TABLE -> $TOPIC"
java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true -Dlog4j2.configurationFile="$dbz/log4j2.properties" \
  -cp "$kc_libs/runtime/*" org.apache.kafka.connect.cli.ConnectStandalone \
  "$dbz/worker.properties" "$dbz/connector.properties" > "$dbz/connect.log" 2>&1 &
dbz_pid=$!
bench_cleanup_hooks+=("kill $dbz_pid")

# dbz_wait_offset OFFSET TIMEOUT_S: waits until the topic's end offset is OFFSET (exits 1 when the
# worker dies, its task fails, the offset passes OFFSET, or on the timeout); logs progress.
dbz_wait_offset() {
  local want="$1" deadline=$((SECONDS + $2)) end last_log=$SECONDS
  while :; do
    end="$("$helper" endoffset "$bootstrap" "$TOPIC" 0 2>/dev/null || echo 0)"
    [[ "$end" =~ ^[0-9]+$ ]] || end=0
    ((end == want)) && return 0
    ((end > want)) && { echo "the topic holds $end events, more than the $want the statements made" >&2; exit 1; }
    kill -0 "$dbz_pid" 2>/dev/null || { tail -40 "$dbz/connect.log" >&2; echo "the Debezium worker exited" >&2; exit 1; }
    if grep -q -E 'unrecoverable exception|Task is being killed' "$dbz/connect.log"; then
      grep -E -A20 'unrecoverable exception' "$dbz/connect.log" | head -60 >&2; echo "the Debezium task failed" >&2; exit 1
    fi
    ((SECONDS > deadline)) && { echo "the topic holds $end of $want events after $2 s (log: $dbz/connect.log)" >&2; exit 1; }
    if ((SECONDS - last_log >= 10)); then log "captured $end of $want events"; last_log=$SECONDS; fi
    sleep 0.5
  done
}
dbz_wait_offset 1 180
log "the connector streams (the sentinel's snapshot is on the topic)"

# The workload: blocks of keys, each a few set-based statements, every statement its own
# transaction. Per key: an insert, two updates, and for 40 % a delete (Debezium: the delete event
# and a tombstone), half of those re-inserted, and an update of half the keys of the block before
# (a key's changes are not all next to each other): ~4.4 events per key.
keys=$((N_TARGET * 10 / 44))
block=$(((keys + 49) / 50))
((block >= 100)) || block=100
{
  for ((lo = 1, prev = 0; lo <= keys; prev = lo, lo += block)); do
    hi=$((lo + block - 1))
    ((hi <= keys)) || hi=$keys
    cat <<SQL
INSERT INTO $TABLE SELECT i, 'item ' || i, i % 100, (i % 10000) / 100.0, CASE WHEN i % 4 = 0 THEN NULL ELSE md5(i::text) END FROM generate_series($lo, $hi) i;
UPDATE $TABLE SET qty = qty + 1, price = price + 0.25 WHERE id BETWEEN $lo AND $hi;
UPDATE $TABLE SET name = name || ' v2', note = CASE WHEN id % 3 = 0 THEN NULL ELSE 'note ' || id END WHERE id BETWEEN $lo AND $hi;
DELETE FROM $TABLE WHERE id BETWEEN $lo AND $hi AND id % 5 IN (0, 1);
INSERT INTO $TABLE SELECT i, 'again ' || i, 7, 1.5, NULL FROM generate_series($lo, $hi) i WHERE i % 5 = 0;
SQL
    if ((prev > 0)); then
      echo "UPDATE $TABLE SET qty = qty * 2, note = coalesce(note, 'was null') WHERE id BETWEEN $prev AND $((lo - 1)) AND id % 2 = 0;"
    fi
  done
  echo "UPDATE $TABLE SET qty = 1 WHERE id = 0;"   # the sentinel: the last change
} > "$work/workload.sql"
log "workload: $keys keys in blocks of $block ($(wc -l < "$work/workload.sql") statements)"
t0=$SECONDS
PGOPTIONS='-c client_min_messages=warning' psql -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$src_port" -U postgres \
  -d "$SOURCE_DB" -f "$work/workload.sql" > "$work/workload.out" ||
  { echo "the workload failed" >&2; tail "$work/workload.out" >&2; exit 1; }
# The events the statements made, from their command tags: a row inserted or updated is one event,
# a row deleted two (the delete and its tombstone); plus the sentinel's snapshot.
read -r n_ins n_upd n_del < <(awk '/^INSERT/ { i += $3 } /^UPDATE/ { u += $2 } /^DELETE/ { d += $2 }
                                   END { print i + 0, u + 0, d + 0 }' "$work/workload.out")
N=$((1 + n_ins + n_upd + 2 * n_del))
log "workload ran in $((SECONDS - t0)) s: $n_ins inserts, $n_upd updates, $n_del deletes: $N events with the snapshot and the tombstones"
dbz_wait_offset "$N" $((300 + N / 1000))
log "the topic holds all $N events ($(du -sh "$broker_dir" | cut -f1) of broker data) after $((SECONDS - t0)) s; stopping the source connector"
kill -TERM "$dbz_pid" 2>/dev/null || true
for _ in $(seq 1 150); do kill -0 "$dbz_pid" 2>/dev/null || break; sleep 0.2; done
kill -KILL "$dbz_pid" 2>/dev/null || true
wait "$dbz_pid" 2>/dev/null || true

# The source's rows (for a diff should a replica differ) and checksum; then its server is stopped,
# the rounds do not need it.
expected="$(psql_at "$src_port" "$SOURCE_DB" "$(changes_checksum_sql "$TABLE")")"
rows_sql="SELECT id, name, qty, price, note FROM $TABLE ORDER BY id"
psql_at "$src_port" "$SOURCE_DB" "\\copy ($rows_sql) TO '$work/source.rows'"
log "source: ${expected% *} rows, checksum ${expected#* }; stopping its server"
"$repo/sinks/postgres/server.sh" stop "$work/pg-source" >&2

# ------------------------------------------------------------------ rounds
results="$work/results.txt"
: > "$results"
mismatches=0

run_entry() {  # ENTRY RUN
  local entry="$1" run="$2" db dir load1 equal got
  db="replica_${entry//-/_}"
  dir="$work/$entry-r$run"
  mkdir -p "$dir"
  load1="$(cut -d' ' -f1 /proc/loadavg)"
  psql_at "$dst_port" postgres "DROP DATABASE IF EXISTS $db" "CREATE DATABASE $db" "CHECKPOINT"
  case "$entry" in
    picomq)
      bench_write_runtime_config "$dir"
      cat > "$dir/sinks.d/changes.toml" <<TOML
type = "sink"
key = "changes"
path = "libpicomq_connector_postgres_sink"
[[topics]]
topics = ["$TOPIC"]
schema = "json"
changes = "debezium"
batch_length = $BATCH_LENGTH
poll_interval = "100ms"
consumer_group = "picomq-bench-changes-r$run"
[plugin_config]
connection_string = "host=127.0.0.1 port=$dst_port dbname=$db user=postgres"
target_table = "$TABLE"
payload_mode = "columns"
write_mode = "upsert"
upsert_key = ["id"]
include_metadata = false
columns = [{ name = "id", type = "int4" }, { name = "name", type = "text" }, { name = "qty", type = "int4" },
           { name = "price", type = "float8" }, { name = "note", type = "text" }]
TOML
      bench_peer picomq "$dir" -- bash "$bench/changes_picomq.sh" "$N" \
        "host=127.0.0.1 port=$dst_port dbname=$db user=postgres" "$TABLE" "$expected" "$dir" -- \
        "$bin" --config "$dir/runtime.toml" ;;
    kafka-connect)
      bench_peer kafka-connect "$dir" -- bash "$bench/peers/kafka_connect_jdbc_changes.sh" "$bootstrap" "$TOPIC" "$N" \
        "jdbc:postgresql://127.0.0.1:$dst_port/$db?user=postgres" "$TABLE" "$dir" "$expected" ;;
  esac
  # Compared again, apart from the runner: the replica's checksum and, when it differs, its rows.
  got="$(psql_at "$dst_port" "$db" "$(changes_checksum_sql "$TABLE")")"
  equal=1
  if [[ "$got" != "$expected" ]]; then
    equal=0
    mismatches=$((mismatches + 1))
    psql_at "$dst_port" "$db" "\\copy ($rows_sql) TO '$dir/replica.rows'"
    diff "$work/source.rows" "$dir/replica.rows" > "$dir/rows.diff" || true
    log "$entry run $run: the replica DIFFERS from the source: $got vs $expected; $(grep -c '^[<>]' "$dir/rows.diff") lines differ, first:"
    head -10 "$dir/rows.diff" >&2
  fi
  echo "entry=$entry run=$run $peer_result replica_rows=${got% *} equal=$equal load1=$load1" >> "$results"
  log "$entry run $run: $peer_result equal=$equal"
}

for ((r = 1; r <= RUNS; r++)); do
  for ((i = 0; i < ${#ENTRIES[@]}; i++)); do
    # Odd rounds in the listed order, even rounds reversed.
    if ((r % 2 == 1)); then run_entry "${ENTRIES[$i]}" "$r"; else run_entry "${ENTRIES[$((${#ENTRIES[@]} - 1 - i))]}" "$r"; fi
  done
done

# ------------------------------------------------------------------ report
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
python3 "$bench/changes_report.py" "$results" "$N" "$RUNS" "${expected% *}" "$load_before" "$load_after" \
  "$(nproc) cores, ${cpu_model:-unknown CPU}; $n_ins inserts, $n_upd updates, $n_del deletes (+ tombstones) on $keys keys; picomq batch_length $BATCH_LENGTH; Kafka Connect batch.size $KC_BATCH_SIZE, max.poll.records ${KC_MAX_POLL_RECORDS:-$KC_BATCH_SIZE}, use.reduction.buffer $KC_REDUCTION_BUFFER" |
  tee "$work/report.txt"
if ((mismatches > 0)); then
  echo "FAILED: $mismatches replica(s) differ from the source (diffs: $work/*/rows.diff)" >&2
  exit 1
fi
