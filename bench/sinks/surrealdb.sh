# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the SurrealDB sink (libpicomq_connector_surrealdb_sink) into a real
# SurrealDB 3.3.5 server (sinks/surrealdb/server.sh, surrealkv storage in the work dir), side by
# side with curl sending the very same request bodies at the same concurrency into a fresh table.
# Sourced by bench/sink_bench.sh; the interface is described in bench/sinks/postgres.sh and
# bench/README.md.
#
# The reference run lets the sink write its table (ids [topic, partition, offset], flat records
# with the pico_* fields). Its records are then read back in offset order (untimed) and encoded
# into the sink's request bodies: POST /rpc, CBOR, "INSERT IGNORE INTO $tb $v RETURN NONE" with
# BENCH_SURREAL_REQUEST_RECORDS records each (bench/sinks/surrealdb_bodies.py); the baseline is
# one curl process sending those bodies with --parallel --parallel-max BENCH_SURREAL_IN_FLIGHT
# over kept-alive connections. Every run is checked: count() equals N, and no answer of the
# baseline holds an ERR statement.
#
# Knobs:
#   BENCH_SURREAL_IN_FLIGHT=4           the sink's max_in_flight and curl's --parallel-max
#   BENCH_SURREAL_REQUEST_RECORDS=1000  the sink's max_request_records and the baseline's records per body

SINK_PLUGIN=libpicomq_connector_surrealdb_sink
SURREAL_IN_FLIGHT="${BENCH_SURREAL_IN_FLIGHT:-4}"
SURREAL_REQUEST_RECORDS="${BENCH_SURREAL_REQUEST_RECORDS:-1000}"
SURREAL_TABLE=bench_target
SINK_TARGET="curl-rpc:0.8"
SINK_DESCRIPTION="surrealdb sink defaults (ids [topic, partition, offset], INSERT IGNORE, flat records with pico_* fields): /rpc CBOR requests of up to $SURREAL_REQUEST_RECORDS records, $SURREAL_IN_FLIGHT in flight"
SINK_BASELINES=("curl-rpc|surreal_baseline_curl")
bench_require_positive BENCH_SURREAL_IN_FLIGHT "$SURREAL_IN_FLIGHT"
bench_require_positive BENCH_SURREAL_REQUEST_RECORDS "$SURREAL_REQUEST_RECORDS"
surreal_dir=""
surreal_port=""

surreal_sql() {  # TEXT: the JSON answer of POST /sql in bench/bench; exits 1 unless 200
  local out
  out="$(curl -sS --fail-with-body -u root:root -H 'Accept: application/json' -H 'surreal-ns: bench' -H 'surreal-db: bench' \
    "http://127.0.0.1:$surreal_port/sql" --data-binary "$1")" || { echo "surrealdb: $1 failed: $out" >&2; exit 1; }
  printf '%s' "$out"
}

sink_check() {
  bash "$repo/sinks/surrealdb/fetch-server.sh" >/dev/null || { echo "no SurrealDB server (sinks/surrealdb/fetch-server.sh)" >&2; exit 2; }
}

sink_server_start() {
  surreal_dir="$work/surrealdb"
  surreal_port="$(bash "$repo/sinks/surrealdb/server.sh" start "$surreal_dir" --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinks/surrealdb/server.sh stop $surreal_dir")
  bench_server_pid="$(cat "$surreal_dir/surreal.pid")"
  curl -sS -o /dev/null -u root:root "http://127.0.0.1:$surreal_port/sql" \
    --data-binary 'DEFINE NAMESPACE IF NOT EXISTS bench; USE NS bench; DEFINE DATABASE IF NOT EXISTS bench;'
  log "SurrealDB $(curl -sS "http://127.0.0.1:$surreal_port/version") on 127.0.0.1:$surreal_port (pid $bench_server_pid, surrealkv)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'url = "http://127.0.0.1:%s"\nnamespace = "bench"\ndatabase = "bench"\npassword = "root"\ntable = "%s"\nmax_in_flight = %s\nmax_request_records = %s\n' \
    "$surreal_port" "$SURREAL_TABLE" "$SURREAL_IN_FLIGHT" "$SURREAL_REQUEST_RECORDS"
}

sink_prepare() {  # KIND LABEL RUN
  surreal_sql "REMOVE TABLE IF EXISTS $SURREAL_TABLE;" >/dev/null
  [[ "$1" == baseline ]] && surreal_sql "DEFINE TABLE $SURREAL_TABLE SCHEMALESS;" >/dev/null
  return 0
}

sink_verify() {  # KIND LABEL RUN
  local got
  got="$(surreal_sql "SELECT count() AS n FROM $SURREAL_TABLE GROUP ALL;" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]["result"]; print(r[0]["n"] if r else 0)')"
  [[ "$got" == "$N" ]] || { echo "$2 run $3: $SURREAL_TABLE holds $got records, not $N" >&2; return 1; }
  if [[ "$1" == baseline ]] && grep -l 'ERR' "$surreal_files"/answer.* >/dev/null 2>&1; then
    echo "$2 run $3: an /rpc answer had an ERR statement" >&2; return 1
  fi
  echo "records=$got"
}

# After the reference load: the bodies the sink sent, rebuilt from its table. Not timed.
sink_reference_loaded() {
  surreal_files="$work/surreal-inputs"
  mkdir -p "$surreal_files"
  python3 "$repo/bench/sinks/surrealdb_bodies.py" "http://127.0.0.1:$surreal_port" "$SURREAL_TABLE" \
    "$SURREAL_REQUEST_RECORDS" "$surreal_files"
  log "baseline input: $(ls "$surreal_files"/body.* | wc -l) /rpc bodies, $(cat "$surreal_files"/body.* | wc -c) bytes"
}

surreal_baseline_curl() {
  rm -f "$surreal_files"/answer.*
  bench_timed /dev/null curl-rpc -- curl -sS --fail --parallel --parallel-max "$SURREAL_IN_FLIGHT" -K "$surreal_files/curl.cfg"
}

sink_notes() {
  echo "SurrealDB 3.3.5 (sinks/surrealdb/server.sh: surrealkv storage in the work dir, root user)"
  echo "baseline: one curl process sending the sink's /rpc CBOR bodies (rebuilt from its table in offset order, $SURREAL_REQUEST_RECORDS records each) with --parallel-max $SURREAL_IN_FLIGHT into a fresh table"
}
