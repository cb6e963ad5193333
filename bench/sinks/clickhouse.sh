# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the ClickHouse sink (libpicomq_connector_clickhouse_sink) against
# clickhouse-client loading the same rows into the same table shape. Sourced by
# bench/sink_bench.sh; the interface is described in bench/sinks/postgres.sh and bench/README.md.
#
# The server is Debian's ClickHouse 18.16 (sinks/clickhouse/server.sh). The reference run lets
# the sink create its table (ReplacingMergeTree by record id, metadata columns, the payload's
# fields as inferred columns); that table is then dumped by the server (FORMAT RowBinary and
# FORMAT Native) and every baseline loads the dump into a fresh table of the same shape
# (CREATE TABLE ... AS the reference) with clickhouse-client over the native TCP port, one
# insert of all rows. Every run is checked: count() and sum(cityHash64(*)) equal the reference's.
#
# Knobs:
#   BENCH_CH_COMMIT_INTERVAL=1s    the sink's commit_interval (one insert per table per interval,
#                                  or per 64 batches / max_batch_records)
#   BENCH_CH_COMPRESSION=none      the sink's compression (none | gzip)
#   BENCH_CH_MAX_RECORDS=          the sink's max_batch_records (default: the sink's)
#   BENCH_CH_FORMATS="RowBinary Native"  the sink's format, one picomq entry each; "Native-whole":
#                                  Native with stream_inserts off (one body per insert, sent at commit)
#   BENCH_CH_BUFFER_RECORDS=       runtime.max_buffered_records (and max_buffered_bytes 256MiB);
#                                  default: the runtime's (an insert gathers up to max_batch_records,
#                                  which the runtime holds pending until the insert succeeds)

SINK_PLUGIN=libpicomq_connector_clickhouse_sink
CH_COMMIT_INTERVAL="${BENCH_CH_COMMIT_INTERVAL:-1s}"
CH_COMPRESSION="${BENCH_CH_COMPRESSION:-none}"
CH_MAX_RECORDS="${BENCH_CH_MAX_RECORDS:-}"
CH_BUFFER_RECORDS="${BENCH_CH_BUFFER_RECORDS:-}"
if [[ -n "$CH_BUFFER_RECORDS" ]]; then
  bench_require_positive BENCH_CH_BUFFER_RECORDS "$CH_BUFFER_RECORDS"
  SINK_RUNTIME_SETTINGS="max_buffered_records = $CH_BUFFER_RECORDS
max_buffered_bytes = \"256MiB\""
fi
CH_DB=bench
CH_TABLE=bench_target
CH_REF=bench_reference
SINK_TARGET="native:0.8"   # the issue: >= 0.8x the faster of the two clickhouse-client loads (Native)
SINK_DESCRIPTION="clickhouse sink defaults (payload_mode columns, inferred, metadata columns, ReplacingMergeTree by record id): Native inserts streamed as they gather, up to 256 batches (64 for an insert sent whole: RowBinary, Native-whole), in the entry's format (commit_interval $CH_COMMIT_INTERVAL, compression $CH_COMPRESSION)"
SINK_BASELINES=("rowbinary|ch_baseline_rowbinary" "native|ch_baseline_native")
read -r -a SINK_VARIANTS <<<"${BENCH_CH_FORMATS:-RowBinary Native}"
for i in "${!SINK_VARIANTS[@]}"; do SINK_VARIANTS[i]="picomq-${SINK_VARIANTS[i]}"; done
ch_dir=""
ch_port=""

ch_sql() {  # SQL: runs it over HTTP, prints the answer; exits 1 with the server's message on an error
  local out
  out="$(curl -sS --fail-with-body "http://127.0.0.1:$ch_port/?database=$CH_DB" --data-binary "$1")" ||
    { echo "clickhouse failed: $1: $out" >&2; exit 1; }
  printf '%s' "$out"
}

sink_check() {
  [[ -x /usr/sbin/clickhouse-server ]] || { echo "no clickhouse-server: run scripts/setup.sh" >&2; exit 2; }
  command -v clickhouse-client >/dev/null || { echo "no clickhouse-client: run scripts/setup.sh" >&2; exit 2; }
}

sink_server_start() {
  ch_dir="$work/clickhouse"
  ch_port="$(bash "$repo/sinks/clickhouse/server.sh" start "$ch_dir" --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinks/clickhouse/server.sh stop $ch_dir")
  bench_server_pid="$(cat "$ch_dir/server.pid")"
  curl -sS "http://127.0.0.1:$ch_port/" --data-binary "CREATE DATABASE $CH_DB" >/dev/null
  log "ClickHouse $(ch_sql 'SELECT version()') on 127.0.0.1:$ch_port (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'url = "http://127.0.0.1:%s"\ndatabase = "%s"\ntarget_table = "%s"\ncommit_interval = "%s"\ncompression = "%s"\n' \
    "$ch_port" "$CH_DB" "$CH_TABLE" "$CH_COMMIT_INTERVAL" "$CH_COMPRESSION"
  [[ -z "$CH_MAX_RECORDS" ]] || printf 'max_batch_records = %s\n' "$CH_MAX_RECORDS"
  local format="${1#picomq-}"
  if [[ "$format" == *-whole ]]; then   # e.g. Native-whole: stream_inserts off (one body per insert at commit)
    format="${format%-whole}"
    printf 'stream_inserts = false\n'
  fi
  printf 'format = "%s"\n' "$format"
}

sink_prepare() {  # KIND LABEL RUN
  ch_sql "DROP TABLE IF EXISTS $CH_TABLE" >/dev/null
  case "$1" in
    reference|picomq) ;;   # the sink creates it
    baseline) ch_sql "CREATE TABLE $CH_TABLE AS $CH_REF" >/dev/null ;;
  esac
}

ch_count_checksum() { ch_sql "SELECT count(), sum(cityHash64(*)) FROM $1 FORMAT TSV" | tr '\t' ' '; }

sink_verify() {  # KIND LABEL RUN
  local got
  got="$(ch_count_checksum "$CH_TABLE")"
  [[ "${got% *}" == "$N" ]] || { echo "$2 run $3: $CH_TABLE holds ${got% *} rows, not $N" >&2; return 1; }
  if [[ "$1" == reference ]]; then
    local offsets
    offsets="$(ch_sql "SELECT uniqExact(pico_offset), min(pico_offset), max(pico_offset) FROM $CH_TABLE FORMAT TSV" | tr '\t' ' ')"
    [[ "$offsets" == "$N 0 $((N - 1))" ]] ||
      { echo "reference load: offsets (distinct min max) are $offsets, not $N 0 $((N - 1))" >&2; return 1; }
  else
    [[ "$got" == "$ch_expected" ]] ||
      { echo "$2 run $3: rows differ from the reference load ($got, expected $ch_expected)" >&2; return 1; }
  fi
  echo "rows=${got% *}"
}

# After the reference load: its table is the template and the source of the baselines' input,
# dumped by the server itself. Not timed.
sink_reference_loaded() {
  ch_expected="$(ch_count_checksum "$CH_TABLE")"
  ch_sql "DROP TABLE IF EXISTS $CH_REF" >/dev/null
  ch_sql "RENAME TABLE $CH_TABLE TO $CH_REF" >/dev/null
  ch_files="$work/ch-inputs"
  mkdir -p "$ch_files"
  curl -sS --fail "http://127.0.0.1:$ch_port/?database=$CH_DB" --data-binary "SELECT * FROM $CH_REF FORMAT RowBinary" > "$ch_files/rows.rowbinary"
  curl -sS --fail "http://127.0.0.1:$ch_port/?database=$CH_DB" --data-binary "SELECT * FROM $CH_REF FORMAT Native" > "$ch_files/rows.native"
  ch_columns="$(ch_sql "SELECT count() FROM system.columns WHERE database = '$CH_DB' AND table = '$CH_REF'")"
  log "reference table: $ch_columns columns; inputs: $(du -sh "$ch_files/rows.rowbinary" | cut -f1) RowBinary, $(du -sh "$ch_files/rows.native" | cut -f1) Native"
}

ch_client() {  # FORMAT FILE
  bench_timed /dev/null "$1" -- bash -c 'clickhouse-client --host 127.0.0.1 --port "$1" --database "$2" --query "INSERT INTO $3 FORMAT $4" < "$5"' \
    ch "$(cat "$ch_dir/tcp_port")" "$CH_DB" "$CH_TABLE" "$1" "$2"
}
ch_baseline_rowbinary() { ch_client RowBinary "$ch_files/rows.rowbinary"; }
ch_baseline_native() { ch_client Native "$ch_files/rows.native"; }

sink_notes() {
  echo "ClickHouse $(ch_sql 'SELECT version()') (sinks/clickhouse/server.sh: one process, data in the work dir); the table: $ch_columns columns"
  echo "baselines: clickhouse-client (native TCP protocol) inserting the reference table's dump (FORMAT RowBinary / Native, made by the server) into a table of the same shape, one insert"
}
