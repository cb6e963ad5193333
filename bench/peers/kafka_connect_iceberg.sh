#!/usr/bin/env bash
# Peer system for the Iceberg sink benchmark: Apache Kafka Connect (standalone worker) with Apache
# Iceberg's own sink connector (org.apache.iceberg:iceberg-kafka-connect 1.12.0, Parquet, S3FileIO),
# appending TOPIC to TABLE of an Iceberg REST catalog whose data files live on S3.
#
#   kafka_connect_iceberg.sh BOOTSTRAP TOPIC N CATALOG_JSON TABLE WORKDIR
#     CATALOG_JSON  the catalog as bench/sinks/iceberg_tool.py takes it: uri, warehouse, credential,
#                   s3.endpoint, s3.access-key-id, s3.secret-access-key, s3.region
#     TABLE         namespace.name, created empty by the caller with the record's fields as columns
#                   (iceberg_tool.py create TABLE plain)
#     WORKDIR       worker + connector properties, offsets file, log4j2 config, connect.log
# Prints ONE line of JSON on stdout (bench/peers/peer_lib.sh's fields) with "commit_interval_ms".
# Rows are counted every PEER_POLL_MS (500) ms from the table's current snapshot (total-records,
# through the catalog, with pyiceberg over one process).
#
# How the connector writes (its design, not a setting): each task writes data files and, every
# iceberg.control.commit.interval-ms, a coordinator (in the task holding the first partition)
# collects them over a control topic (transactions: exactly-once into the table) and commits one
# snapshot. The sink commits per commit_records (or commit_interval) from one process. Here
# KC_ICEBERG_COMMIT_MS is 2000: ~8 commits per million records at the connector's rate on this
# machine; bench/peers.sh runs the sink with commit_records 100,000 (10 per million) beside it.
# Same table properties as the sink's table: zstd Parquet, write.target-file-size-bytes
# KC_ICEBERG_FILE_BYTES (134217728). Values: JsonConverter without schemas (the record's JSON object
# becomes a row; its list and object fields go into the string columns as JSON text).
# Knobs: KC_ICEBERG_COMMIT_MS, KC_ICEBERG_FILE_BYTES, KC_ICEBERG_COMPRESSION (zstd),
#   KC_MAX_POLL_RECORDS, KC_HEAP_OPTS, KC_JVM_OPTS, KC_LOG_LEVEL (bench/peers/kafka_connect_lib.sh),
#   PEER_SERVER_PID, PEER_POLL_MS, PEER_TIMEOUT_S (bench/peers/peer_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$here/../../tools/venv/bin/python"
tool="$here/../sinks/iceberg_tool.py"
(($# == 6)) || { echo "usage: $0 BOOTSTRAP TOPIC N CATALOG_JSON TABLE WORKDIR" >&2; exit 2; }
bootstrap="$1"; topic="$2"; n="$3"; catalog="$4"; table="$5"; work="$6"
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_iceberg: N must be a positive integer" >&2; exit 2; }
commit_ms="${KC_ICEBERG_COMMIT_MS:-2000}"
# The coordinator and the workers act on control events between the worker's polls, and a poll waits
# up to offset.flush.interval.ms when no record comes: at the default 10 s the last commit of a run
# waited that long. The same as the commit interval: it never waits longer than one interval.
export KC_OFFSET_FLUSH_MS="${KC_OFFSET_FLUSH_MS:-$commit_ms}"
export PEER_POLL_MS="${PEER_POLL_MS:-500}"

# shellcheck source=bench/peers/peer_lib.sh
source "$here/peer_lib.sh"
peer_init kafka-connect-iceberg
# shellcheck source=bench/peers/kafka_connect_lib.sh
source "$here/kafka_connect_lib.sh"

prop() { "$py" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$catalog" "$1"; }
kc_setup iceberg-kafka-connect "$work"
control="iceberg-control-${kc_connector##*-}"   # one control topic per run (the worker auto-creates it)
kc_worker "key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false"
kc_connector org.apache.iceberg.connect.IcebergSinkConnector "\
iceberg.tables=$table
iceberg.control.topic=$control
iceberg.control.commit.interval-ms=$commit_ms
iceberg.catalog.type=rest
iceberg.catalog.uri=$(prop uri)
iceberg.catalog.warehouse=$(prop warehouse)
iceberg.catalog.credential=$(prop credential)
iceberg.catalog.io-impl=org.apache.iceberg.aws.s3.S3FileIO
iceberg.catalog.s3.endpoint=$(prop s3.endpoint)
iceberg.catalog.s3.access-key-id=$(prop s3.access-key-id)
iceberg.catalog.s3.secret-access-key=$(prop s3.secret-access-key)
iceberg.catalog.s3.path-style-access=true
iceberg.catalog.client.region=$(prop s3.region)
iceberg.tables.write-props.write.parquet.compression-codec=${KC_ICEBERG_COMPRESSION:-zstd}
iceberg.tables.write-props.write.target-file-size-bytes=${KC_ICEBERG_FILE_BYTES:-134217728}"

coproc COUNTER { exec "$py" -u "$tool" "$catalog" count "$table" 2>&1; }
peer_cleanup_hooks+=("kill $COUNTER_PID 2>/dev/null")
counter_in=${COUNTER[1]}; counter_out=${COUNTER[0]}
IFS= read -r -t 60 answer <&"$counter_out" || die "pyiceberg did not start"
[[ "$answer" == ready ]] || die "pyiceberg: $answer"
count_rows() {
  printf 'x\n' >&"$counter_in"
  IFS= read -r -t 30 answer <&"$counter_out" || die "pyiceberg did not answer"
  [[ "$answer" =~ ^[0-9]+$ ]] || die "pyiceberg: $answer"
  count="$answer"
}

log "$topic -> $table, commit interval $commit_ms ms, control topic $control"
kc_start
peer_wait "$n" count_rows kc_failed
peer_report kafka-connect-iceberg ",\"commit_interval_ms\":$commit_ms"
