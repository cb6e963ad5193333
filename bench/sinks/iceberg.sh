# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the Iceberg sink (libpicomq_connector_iceberg_sink, Rust on iceberg-rust)
# appending the orders shape to an Iceberg table of SeaweedFS 4.48's REST catalog (data files on
# its S3), against pyiceberg's table.append() of the very same rows (the reference run's table,
# dumped to an Arrow IPC file) into a fresh table of the same catalog, with the same target file
# size and codec, in one commit. Sourced by bench/sink_bench.sh; the interface is described in
# bench/sinks/postgres.sh.
#
# The baseline does less than the sink: its rows are already an Arrow table in memory, so it
# measures Parquet encoding, the upload and the commit alone; the sink consumes from Kafka, decodes
# JSON, exports Arrow, conforms, encodes, uploads and commits per window.
# Verification (pyiceberg): every picomq run's table holds offsets 0..N-1 exactly once; every
# baseline table holds N rows.
#
# Knobs:
# BENCH_PEER=1 (bench/peers.sh): Kafka Connect 4.1.1 with Apache Iceberg's sink 1.12.0
# (bench/peers/kafka_connect_iceberg.sh) into a table of the same catalog with the record's fields
# alone (no pico_* columns: the connector has none), verified by N distinct order ids.
#
#   BENCH_ICEBERG_COMMIT_RECORDS=400000 the sink's commit_records (records per commit)
#   BENCH_ICEBERG_FILE_BYTES=128MiB     the sink's target_file_size
#   BENCH_ICEBERG_COMPRESSION=zstd      the sink's compression = the baseline's
#   BENCH_ICEBERG_BUFFER_RECORDS=400000 runtime.max_buffered_records (writes stay pending until a commit)

SINK_PLUGIN=libpicomq_connector_iceberg_sink
ICEBERG_COMMIT="${BENCH_ICEBERG_COMMIT_RECORDS:-400000}"
ICEBERG_FILE_BYTES="${BENCH_ICEBERG_FILE_BYTES:-128MiB}"
ICEBERG_COMPRESSION="${BENCH_ICEBERG_COMPRESSION:-zstd}"
ICEBERG_BUFFER="${BENCH_ICEBERG_BUFFER_RECORDS:-400000}"
bench_require_positive BENCH_ICEBERG_COMMIT_RECORDS "$ICEBERG_COMMIT"
SINK_RUNTIME_SETTINGS="max_buffered_records = $ICEBERG_BUFFER
max_buffered_bytes = \"256MiB\""
SINK_DESCRIPTION="iceberg sink: orders shape, inferred columns conformed to the table, $ICEBERG_COMPRESSION Parquet, commit_records $ICEBERG_COMMIT, target_file_size $ICEBERG_FILE_BYTES, SeaweedFS REST catalog + S3"
SINK_TARGET="pyiceberg_append:0.8"
SINK_BASELINES=("pyiceberg_append|iceberg_baseline_write")
SINK_PEERS=("kafka-connect-iceberg|iceberg_peer_kafka_connect")
iceberg_python="$repo/tools/venv/bin/python"
iceberg_tool="$repo/bench/sinks/iceberg_tool.py"
iceberg_current=""
iceberg_bucket="bench"

sink_check() {
  "$iceberg_python" -c 'import pyiceberg, pyarrow, boto3' 2>/dev/null || { echo "pyiceberg is missing in tools/venv: run scripts/setup.sh" >&2; exit 2; }
  [[ -f "$plugins/$SINK_PLUGIN.so" ]] || { echo "$plugins/$SINK_PLUGIN.so is not built (cargo: scripts/build.sh)" >&2; exit 2; }
}

sink_server_start() {
  iceberg_dir="$work/seaweedfs"
  iceberg_s3="http://127.0.0.1:$(bash "$repo/sinks/s3/server.sh" start "$iceberg_dir" --owner $$)"
  iceberg_catalog="http://127.0.0.1:$(bash "$repo/sinks/s3/server.sh" iceberg-port "$iceberg_dir")"
  bench_cleanup_hooks+=("bash $repo/sinks/s3/server.sh stop $iceberg_dir")
  bench_server_pid="$(cat "$iceberg_dir/server.pid")"
  iceberg_props="{\"uri\": \"$iceberg_catalog\", \"warehouse\": \"s3://$iceberg_bucket\", \"credential\": \"picomq-test:picomq-test-secret\", \"s3.endpoint\": \"$iceberg_s3\", \"s3.access-key-id\": \"picomq-test\", \"s3.secret-access-key\": \"picomq-test-secret\", \"s3.region\": \"us-east-1\"}"
  local tries=0
  until "$iceberg_python" "$iceberg_tool" "$iceberg_props" bucket "$iceberg_bucket" 2>/dev/null; do
    (( ++tries < 50 )) || { echo "could not create the table bucket" >&2; exit 1; }
    sleep 0.2
  done
  log "SeaweedFS S3 at $iceberg_s3, Iceberg REST catalog at $iceberg_catalog (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'catalog_uri = "%s"\nwarehouse = "s3://%s"\ncatalog_credential = "picomq-test:picomq-test-secret"\ntable = "%s"\n' \
    "$iceberg_catalog" "$iceberg_bucket" "$iceberg_current"
  printf 's3_endpoint = "%s"\ns3_region = "us-east-1"\ns3_access_key_id = "picomq-test"\ns3_secret_access_key = "picomq-test-secret"\n' "$iceberg_s3"
  printf 'commit_records = %s\ntarget_file_size = "%s"\ncompression = "%s"\ncommit_interval = "60s"\n' \
    "$ICEBERG_COMMIT" "$ICEBERG_FILE_BYTES" "$ICEBERG_COMPRESSION"
}

sink_prepare() {  # KIND LABEL RUN
  local label="${2//[^A-Za-z0-9]/_}"
  iceberg_current="bench.${1}_${label}_$3"
  local shape=()
  [[ "$1" == peer ]] && shape=(plain)   # the connector writes the record's fields alone
  "$iceberg_python" "$iceberg_tool" "$iceberg_props" create "$iceberg_current" ${shape[@]+"${shape[@]}"}
}

sink_verify() {  # KIND LABEL RUN
  local got
  if [[ "$1" == peer ]]; then got="$("$iceberg_python" "$iceberg_tool" "$iceberg_props" verify "$iceberg_current" "$N" ids)" || return 1
  elif [[ "$1" == baseline ]]; then got="$("$iceberg_python" "$iceberg_tool" "$iceberg_props" verify "$iceberg_current" "$N")" || return 1
  else got="$("$iceberg_python" "$iceberg_tool" "$iceberg_props" verify "$iceberg_current" "$N" exact)" || return 1; fi
  echo "$got" | tr ' ' '\n' | sed 's/^/iceberg_/' | tr '\n' ' '
}

sink_reference_loaded() {
  iceberg_input="$work/iceberg-rows.arrow"
  "$iceberg_python" "$iceberg_tool" "$iceberg_props" dump "$iceberg_current" "$iceberg_input"
  iceberg_reference="$("$iceberg_python" "$iceberg_tool" "$iceberg_props" verify "$iceberg_current" "$N")"
  local files="${iceberg_reference#*files=}" bytes="${iceberg_reference#*bytes=}"
  files="${files%% *}"
  iceberg_file_bytes=$(( bytes / (files > 0 ? files : 1) ))
  log "reference table: $iceberg_reference; baseline write.target-file-size-bytes $iceberg_file_bytes"
}

iceberg_baseline_write() {  # RUN
  bench_timed /dev/null pyiceberg_append -- "$iceberg_python" "$iceberg_tool" "$iceberg_props" write "$iceberg_current" "$iceberg_input" "$iceberg_file_bytes" "$ICEBERG_COMPRESSION"
}

iceberg_peer_kafka_connect() {  # RUN
  bench_peer kafka-connect-iceberg "$work/peer-kafka-connect-r$1" -- bash "$repo/bench/peers/kafka_connect_iceberg.sh" \
    "$bootstrap" "$TOPIC" "$N" "$iceberg_props" "$iceberg_current" "$work/peer-kafka-connect-r$1"
}

sink_notes() {
  [[ "${BENCH_PEER:-0}" == 1 ]] && echo "peer kafka-connect-iceberg: Kafka Connect 4.1.1 standalone + iceberg-kafka-connect 1.12.0 (REST catalog, S3FileIO, $ICEBERG_COMPRESSION Parquet, write.target-file-size-bytes 134217728, commit interval ${KC_ICEBERG_COMMIT_MS:-2000} ms, JsonConverter without schemas); its time: JVM launch to N rows in the table's current snapshot"
  echo "reference table: $iceberg_reference (the sink's files); baseline: pyiceberg $("$iceberg_python" -c 'import pyiceberg; print(pyiceberg.__version__)') table.append() of the same rows from an Arrow IPC file, write.target-file-size-bytes = the sink's mean file size, one commit; SeaweedFS 4.48 REST catalog and S3 (sinks/s3/server.sh)"
}
