# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the PostgreSQL sink (libpicomq_connector_postgres_sink) against psql
# loading the same rows into the same table. Sourced by bench/sink_bench.sh; do not run it.
#
# Adapter interface (what sink_bench.sh calls; every adapter in bench/sinks/ follows it, see
# bench/README.md "Writing an adapter"):
#   SINK_PLUGIN            the plugin library name (required)
#   SINK_DESCRIPTION       one line for the report
#   SINK_VARIANTS          picomq entries (labels); default (picomq)
#   SINK_BASELINES         "label|function" pairs; function RUN runs one timed load via bench_timed
#   SINK_PEERS             "label|function" pairs, run with BENCH_PEER=1; function RUN sets peer_result
#   SINK_TARGET            "baseline:ratio" the report checks, e.g. copy-binary:0.8
#   sink_check             prerequisites (exit 2 when missing)
#   sink_server_start      starts the destination; registers its stop in bench_cleanup_hooks and
#                          sets bench_server_pid (its CPU is then measured in every run)
#   sink_records_produced  after the N records are on the topic ($records_file still exists)
#   sink_plugin_config VARIANT RUN DIR   prints the [plugin_config] body of a picomq run
#   sink_prepare KIND LABEL RUN          fresh destination before a run (KIND: reference, picomq,
#                                        baseline, peer); untimed
#   sink_verify KIND LABEL RUN           after every run: exit non-zero unless the destination holds
#                                        exactly the N records; prints extra key=value fields
#   sink_reference_loaded  after the untimed reference run of the first picomq entry: prepares the
#                          baselines' inputs (here: dumps of the table the sink wrote)
#   sink_notes             free text lines for the report (settings, sizes)
#
# Knobs:
#   BENCH_PG_PROFILE=default   what the sink writes, and so the table every entry loads:
#       default  the sink's defaults: write_mode insert, include_metadata, payload_mode jsonb:
#                pico_id text PRIMARY KEY, pico_topic, pico_partition, pico_offset, pico_timestamp,
#                pico_key, pico_headers jsonb, payload jsonb. The sink COPYs up to 64 batches
#                straight into the table per transaction, each transaction committing while the
#                next streams on another connection (through a temp staging table and
#                INSERT ... ON CONFLICT DO NOTHING only while a partition replays).
#       append   write_mode append, with metadata: the same columns without pico_id and without a
#                key; the sink COPYs each batch straight into the table.
#       payload  write_mode append, include_metadata = false: one column, payload jsonb.
#   BENCH_PG_INSERT_ROWS=1000  rows per statement of the multi-row INSERT baseline
#   BENCH_PG_BASELINES=        space-separated subset of baseline labels (default: all)

SINK_PLUGIN=libpicomq_connector_postgres_sink
PG_PROFILE="${BENCH_PG_PROFILE:-default}"
PG_INSERT_ROWS="${BENCH_PG_INSERT_ROWS:-1000}"
PG_BIN=/usr/lib/postgresql/15/bin
PG_DB=bench
PG_TABLE=bench_target
PG_REF=bench_reference
SINK_TARGET="copy-binary:0.8"
bench_require_positive BENCH_PG_INSERT_ROWS "$PG_INSERT_ROWS"

case "$PG_PROFILE" in
  default) pg_profile_config=''
           SINK_DESCRIPTION="postgres sink defaults (write_mode insert, metadata columns, payload jsonb; pico_id primary key): one binary COPY into the table for up to 64 batches per transaction, committed beside the next one on another connection (commit_interval 1s; staging + INSERT ON CONFLICT, streamed, only while a partition replays after an assignment)" ;;
  append)  pg_profile_config='write_mode = "append"'
           SINK_DESCRIPTION="postgres sink, write_mode append with metadata columns, payload jsonb, no key: one binary COPY for up to 64 batches per transaction, committed beside the next" ;;
  payload) pg_profile_config=$'write_mode = "append"\ninclude_metadata = false'
           SINK_DESCRIPTION="postgres sink, write_mode append, include_metadata = false (one jsonb column): one binary COPY for up to 64 batches per transaction, committed beside the next" ;;
  *) echo "BENCH_PG_PROFILE must be default, append or payload" >&2; exit 2 ;;
esac

SINK_BASELINES=(
  "copy-binary|pg_baseline_copy_binary"
  "copy-text|pg_baseline_copy_text"
  "insert-multirow|pg_baseline_insert"
  "copy-binary-per-batch|pg_baseline_copy_batches"
)
[[ "$PG_PROFILE" == default ]] && SINK_BASELINES+=("psql-sink-sql|pg_baseline_sink_sql")
if [[ -n "${BENCH_PG_BASELINES:-}" ]]; then
  pg_keep=()
  for b in "${SINK_BASELINES[@]}"; do
    [[ " $BENCH_PG_BASELINES " == *" ${b%%|*} "* ]] && pg_keep+=("$b")
  done
  SINK_BASELINES=(${pg_keep[@]+"${pg_keep[@]}"})
fi
# BENCH_PEER=1 also runs Telegraf 1.37.2 with outputs.postgresql (bench/peers/telegraf.sh postgresql):
# its own table "orders" in database bench_peer, a column per tag and field, COPY per batch of
# BATCH_LENGTHS[0] metrics; checked by count(DISTINCT id) = N.
pg_peer_script="$repo/bench/peers/kafka_connect_jdbc.sh"
if [[ -f "$pg_peer_script" ]]; then
  SINK_PEERS=("kafka-connect-jdbc|pg_peer_kafka_connect")
elif [[ "${BENCH_PEER:-0}" == 1 ]]; then
  log "BENCH_PEER=1: $pg_peer_script is not there, the peer is skipped"
fi
SINK_PEERS+=("telegraf-postgresql|pg_peer_telegraf")

# pg_sql DB SQL...: runs SQL (psql -c each), prints tuples unaligned; exits 1 on an error.
pg_sql() {  # (NOTICEs such as "does not exist, skipping" are silenced)
  local db="$1" args=()
  shift
  for s in "$@"; do args+=(-c "$s"); done
  PGOPTIONS='-c client_min_messages=warning' \
    psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d "$db" "${args[@]}" ||
    { echo "psql failed on database $db: $*" >&2; exit 1; }
}

sink_check() {
  [[ -x "$PG_BIN/initdb" ]] || { echo "no $PG_BIN/initdb: run scripts/setup.sh (postgresql-15)" >&2; exit 2; }
  command -v psql >/dev/null || { echo "no psql: run scripts/setup.sh (postgresql-15)" >&2; exit 2; }
}

sink_server_start() {
  pg_dir="$work/postgres"
  pg_port="$(bench_free_port)"
  [[ -n "$pg_port" ]] || { echo "no free port for PostgreSQL" >&2; exit 1; }
  log "starting PostgreSQL 15 on 127.0.0.1:$pg_port (dir $pg_dir)"
  bench_cleanup_hooks+=("'$repo/sinks/postgres/server.sh' stop '$pg_dir'")
  # Owner pid $$: the server's watchdog stops it should this script die without its trap.
  "$repo/sinks/postgres/server.sh" start "$pg_dir" "$pg_port" "$$" >&2
  # Bulk-load settings, the same for every entry: no autovacuum (it would work on the previous
  # run's table during the next run and its CPU would count as the server's), and a WAL budget
  # large enough that no checkpoint starts inside a run (each run starts after a CHECKPOINT).
  pg_sql postgres "ALTER SYSTEM SET autovacuum = off" "ALTER SYSTEM SET max_wal_size = '8GB'" \
    "SELECT pg_reload_conf()" "CREATE DATABASE $PG_DB" > /dev/null
  bench_server_pid="$(head -1 "$pg_dir/data/postmaster.pid")"
  [[ "$bench_server_pid" =~ ^[0-9]+$ ]] || { echo "no postmaster pid in $pg_dir/data/postmaster.pid" >&2; exit 1; }
}

sink_plugin_config() {
  printf 'connection_string = "host=127.0.0.1 port=%s dbname=%s user=postgres"\ntarget_table = "%s"\n%s\n' \
    "$pg_port" "$PG_DB" "$PG_TABLE" "$pg_profile_config"
}

sink_prepare() {  # KIND LABEL RUN
  case "$1" in
    reference|picomq) pg_sql "$PG_DB" "DROP TABLE IF EXISTS $PG_TABLE" ;;   # the sink creates it
    baseline) pg_sql "$PG_DB" "DROP TABLE IF EXISTS $PG_TABLE" "CREATE TABLE $PG_TABLE (LIKE $PG_REF INCLUDING ALL)" ;;
    peer) pg_sql postgres "DROP DATABASE IF EXISTS bench_peer" "CREATE DATABASE bench_peer" ;;
  esac
  # Autovacuum is off: vacuum the catalogs here (untimed), or the temp staging tables of the
  # default profile (created and dropped per batch) would bloat them from run to run.
  pg_sql "$PG_DB" "VACUUM pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_type, pg_catalog.pg_depend"
  pg_sql postgres "CHECKPOINT"
}

# count and checksum of TABLE in DB: "<rows> <sum of hashtext(row as text)>"
pg_count_checksum() {
  pg_sql "$1" "SELECT count(*) || ' ' || coalesce(sum(hashtext(t::text)::bigint), 0) FROM $2 t"
}

sink_verify() {  # KIND LABEL RUN
  local got
  case "$1" in
    reference)
      got="$(pg_count_checksum "$PG_DB" "$PG_TABLE")"
      [[ "${got% *}" == "$N" ]] || { echo "reference load: $PG_TABLE holds ${got% *} rows, not $N" >&2; return 1; }
      if [[ "$PG_PROFILE" != payload ]]; then
        local offsets
        offsets="$(pg_sql "$PG_DB" "SELECT count(DISTINCT pico_offset) || ' ' || min(pico_offset) || ' ' || max(pico_offset) FROM $PG_TABLE")"
        [[ "$offsets" == "$N 0 $((N - 1))" ]] ||
          { echo "reference load: offsets (distinct min max) are $offsets, not $N 0 $((N - 1))" >&2; return 1; }
      fi
      echo "rows=${got% *}" ;;   # (a subshell: sink_reference_loaded records the checksum)
    picomq|baseline)
      got="$(pg_count_checksum "$PG_DB" "$PG_TABLE")"
      [[ "${got% *}" == "$N" ]] || { echo "$2 run $3: $PG_TABLE holds ${got% *} rows, not $N" >&2; return 1; }
      [[ "$got" == "$pg_expected" ]] ||
        { echo "$2 run $3: rows differ from the reference load (count checksum $got, expected $pg_expected)" >&2; return 1; }
      echo "rows=${got% *}" ;;
    peer)
      if [[ "$2" == telegraf* ]]; then got="$(pg_sql bench_peer "SELECT count(DISTINCT id) FROM orders")"
      else got="$(pg_sql bench_peer "SELECT count(*) FROM bench_peer")"; fi
      [[ "$got" == "$N" ]] || { echo "$2 run $3: database bench_peer holds $got distinct records, not $N" >&2; return 1; }
      echo "rows=$got" ;;
  esac
}

# After the reference load: keep its table as the template and as the source of every baseline's
# input, dumped by the server itself (binary and text COPY, multi-row INSERT statements), so the
# baselines load byte-for-byte the rows the sink wrote. None of this is timed.
sink_reference_loaded() {
  pg_expected="$(pg_count_checksum "$PG_DB" "$PG_TABLE")"
  pg_sql "$PG_DB" "DROP TABLE IF EXISTS $PG_REF" "ALTER TABLE $PG_TABLE RENAME TO $PG_REF"
  pg_files="$work/pg-inputs"
  mkdir -p "$pg_files"
  log "dumping the reference table: binary COPY, text COPY, multi-row INSERTs ($PG_INSERT_ROWS rows each)"
  pg_sql "$PG_DB" "\\copy $PG_REF TO '$pg_files/rows.bin' (FORMAT binary)"
  pg_sql "$PG_DB" "\\copy $PG_REF TO '$pg_files/rows.txt' (FORMAT text)"
  local cols n_cols fmt
  cols="$(pg_sql "$PG_DB" "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
                           WHERE attrelid = '$PG_REF'::regclass AND attnum > 0 AND NOT attisdropped")"
  n_cols="$(pg_sql "$PG_DB" "SELECT count(*) FROM pg_attribute WHERE attrelid = '$PG_REF'::regclass AND attnum > 0 AND NOT attisdropped")"
  # shellcheck disable=SC2046
  fmt="$(printf '%%L,%.0s' $(seq 1 "$n_cols"))"
  fmt="(${fmt%,})"   # (%L,%L,...): format() quotes each value as a literal, NULL as NULL
  pg_sql "$PG_DB" "SELECT 'INSERT INTO $PG_TABLE VALUES ' || string_agg(format('$fmt', $cols), ',' ORDER BY pico__rn) || ';'
                   FROM (SELECT t.*, row_number() OVER (ORDER BY ctid) - 1 AS pico__rn FROM $PG_REF t) s
                   GROUP BY pico__rn / $PG_INSERT_ROWS ORDER BY pico__rn / $PG_INSERT_ROWS" > "$pg_files/insert.sql"
  # Per-batch inputs: the binary dump cut into batch_length-row COPY files (the first
  # BENCH_BATCH_LENGTH), and two psql scripts over them.
  local chunk="${BATCH_LENGTHS[0]}" defs
  python3 "$bench/pg_copy_split.py" "$pg_files/rows.bin" "$chunk" "$pg_files/chunks" > "$pg_files/chunks.list"
  # copy-binary-per-batch: one \copy per batch, each its own transaction (autocommit).
  sed "s|.*|\\\\copy $PG_TABLE FROM '&' (FORMAT binary)|" "$pg_files/chunks.list" > "$pg_files/copy-batches.psql"
  # psql-sink-sql: the statements the sink runs per batch (default profile), driven by psql:
  # BEGIN; CREATE TEMP TABLE staging ... ON COMMIT DROP; COPY staging FROM STDIN (FORMAT binary);
  # INSERT INTO target SELECT ... FROM staging ON CONFLICT (pico_id) DO NOTHING; COMMIT.
  defs="$(pg_sql "$PG_DB" "SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
                           FROM pg_attribute WHERE attrelid = '$PG_REF'::regclass AND attnum > 0 AND NOT attisdropped")"
  while IFS= read -r f; do
    printf 'BEGIN;\nCREATE TEMP TABLE pg_temp."pico_staging" (%s) ON COMMIT DROP;\n' "$defs"
    printf "\\\\copy pg_temp.\"pico_staging\" FROM '%s' (FORMAT binary)\n" "$f"
    printf 'INSERT INTO %s (%s) SELECT %s FROM pg_temp."pico_staging" ON CONFLICT ("pico_id") DO NOTHING;\nCOMMIT;\n' \
      "$PG_TABLE" "$cols" "$cols"
  done < "$pg_files/chunks.list" > "$pg_files/sink-sql.psql"
  pg_table_mb="$(pg_sql "$PG_DB" "SELECT round(pg_total_relation_size('$PG_REF') / 1e6)")"
  log "reference table: $pg_table_mb MB with indexes; inputs: $(du -sh "$pg_files" | cut -f1)"
}

pg_baseline_copy_binary() { bench_timed /dev/null copy-binary -- psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d "$PG_DB" -c "\\copy $PG_TABLE FROM '$pg_files/rows.bin' (FORMAT binary)"; }
pg_baseline_copy_text() { bench_timed /dev/null copy-text -- psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d "$PG_DB" -c "\\copy $PG_TABLE FROM '$pg_files/rows.txt' (FORMAT text)"; }
pg_baseline_insert() { bench_timed /dev/null insert-multirow -- psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d "$PG_DB" -f "$pg_files/insert.sql"; }
pg_baseline_copy_batches() { bench_timed /dev/null copy-binary-per-batch -- psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d "$PG_DB" -f "$pg_files/copy-batches.psql"; }
pg_baseline_sink_sql() { bench_timed /dev/null psql-sink-sql -- psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d "$PG_DB" -f "$pg_files/sink-sql.psql"; }

# Kafka Connect + Debezium JDBC sink (bench/peers/kafka_connect_jdbc.sh, another engineer's):
# same topic, a fresh database bench_peer, table bench_peer. The script prints one JSON line.
pg_peer_kafka_connect() {
  bench_peer kafka-connect-jdbc "$work/peer-kafka-connect-r$1" -- bash "$pg_peer_script" "$bootstrap" "$TOPIC" "$N" \
    "jdbc:postgresql://127.0.0.1:$pg_port/bench_peer?user=postgres" bench_peer "$work/peer-kafka-connect-r$1"
}

pg_peer_telegraf() {  # RUN
  TG_BATCH="${BATCH_LENGTHS[0]}" bench_peer telegraf-postgresql "$work/peer-telegraf-r$1" -- bash "$repo/bench/peers/telegraf.sh" \
    postgresql "$bootstrap" "$TOPIC" "$N" "$work/peer-telegraf-r$1" "host=127.0.0.1 port=$pg_port user=postgres dbname=bench_peer"
}

sink_notes() {
  if [[ "${BENCH_PEER:-0}" == 1 ]]; then
    echo "peer kafka-connect-jdbc: Kafka Connect 4.1.1 standalone + Debezium JDBC sink 3.6.0 (insert.mode insert, primary.key.mode kafka, batch.size 1000, payload jsonb); its time: JVM launch to N rows"
    echo "peer telegraf-postgresql: Telegraf 1.37.2 kafka_consumer -> json parser -> outputs.postgresql (table orders, a column per tag and field, COPY of ${BATCH_LENGTHS[0]} metrics); its time: launch to N rows"
  fi
  echo "PostgreSQL 15 (sinks/postgres/server.sh: fsync off, synchronous_commit off, full_page_writes off; plus autovacuum off, max_wal_size 8GB; catalogs vacuumed and CHECKPOINT before every run)"
  echo "profile $PG_PROFILE: $SINK_DESCRIPTION"
  echo "table with indexes after a load: ${pg_table_mb:-?} MB; baselines load the reference load's rows (dumped by the server) with psql over TCP"
  echo "copy-binary / copy-text: one \\copy of all rows (one transaction); insert-multirow: INSERT ... VALUES of $PG_INSERT_ROWS rows per statement, one transaction each;"
  echo "copy-binary-per-batch: one \\copy of ${BATCH_LENGTHS[0]} rows per transaction; psql-sink-sql: the statements the sink ran per batch before its direct-COPY path (temp staging + INSERT ON CONFLICT), from psql"
}
