# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the Redshift sink with dialect postgres_shim: staged in SeaweedFS (S3) as
# gzip CSV + manifest, loaded into PostgreSQL 15 (the SQL stand-in) by COPY (the shim: manifest and
# files read back from S3, COPY FROM STDIN) + MERGE + the offsets row in one transaction per batch.
# No Redshift exists here and no baseline is run: what it measures is the sink's own rate and
# CPU per record (both servers' CPU is reported apart). Verification: N rows, N distinct offsets.

SINK_PLUGIN=libpicomq_connector_redshift_sink
SINK_DESCRIPTION="redshift sink (postgres_shim): gzip CSV staged in SeaweedFS, COPY + MERGE + offsets row per batch into PostgreSQL 15"
SINK_TARGET=""
rs_pg_dir="" rs_pg_port="" rs_s3_dir="" rs_s3_endpoint="" rs_db=""

rs_sql() { psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$rs_pg_port" -U postgres -d "$1" -c "$2"; }

sink_server_start() {
  rs_pg_dir="$work/postgres"
  rs_pg_port="$(bench_free_port)"
  bench_cleanup_hooks+=("'$repo/sinks/postgres/server.sh' stop '$rs_pg_dir'")
  "$repo/sinks/postgres/server.sh" start "$rs_pg_dir" "$rs_pg_port" "$$" >&2
  rs_s3_dir="$work/seaweedfs"
  rs_s3_endpoint="http://127.0.0.1:$(bash "$repo/sinks/s3/server.sh" start "$rs_s3_dir" --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinks/s3/server.sh stop $rs_s3_dir")
  bench_server_pid="$(cat "$rs_s3_dir/server.pid")"
  log "PostgreSQL 15 on 127.0.0.1:$rs_pg_port, SeaweedFS S3 at $rs_s3_endpoint"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'connection_string = "host=127.0.0.1 port=%s user=postgres dbname=%s"\ntarget_table = "orders"\ndialect = "postgres_shim"\n' \
    "$rs_pg_port" "$rs_db"
  printf 's3_bucket = "%s"\ns3_endpoint = "%s"\naws_access_key_id = "picomq-test"\naws_secret_access_key = "picomq-test-secret"\n' \
    "${rs_db//_/-}" "$rs_s3_endpoint"
}

sink_prepare() {  # KIND LABEL RUN
  rs_db="$(echo "bench_$1_$2_$3" | tr '[:upper:]-' '[:lower:]_')"
  rs_sql postgres "DROP DATABASE IF EXISTS $rs_db" && rs_sql postgres "CREATE DATABASE $rs_db"
  curl -sf -XPUT --aws-sigv4 "aws:amz:us-east-1:s3" --user picomq-test:picomq-test-secret "$rs_s3_endpoint/${rs_db//_/-}" > /dev/null || true
}

sink_verify() {  # KIND LABEL RUN
  local counts
  counts="$(rs_sql "$rs_db" "SELECT count(*) || ' ' || count(DISTINCT (pico_partition, pico_offset)) FROM orders")"
  [[ "$counts" == "$N $N" ]] || { echo "$2 run $3: rows / distinct offsets $counts, expected $N" >&2; return 1; }
  echo "rows=$N"
}

sink_notes() { echo "Destination: PostgreSQL 15 + SeaweedFS with the shim: the sink's own overhead, not Redshift's speed."; }
