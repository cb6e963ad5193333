# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the S3 sink (libpicomq_connector_s3_sink) writing gzip JSON lines objects
# (metadata envelope) into SeaweedFS 4.48 (sinks/s3/server.sh, SigV4 checked), against boto3
# uploading the very same object bytes as the same objects (same keys, same count) into the same
# server with as many uploads at once as the sink. Sourced by bench/sink_bench.sh; the interface
# is described in bench/sinks/postgres.sh and bench/README.md.
#
# The baseline does less than the sink: its bytes are encoded and compressed already (the
# reference run's objects, downloaded), so it measures S3 upload alone; the sink consumes from
# Kafka, renders JSON, gzips and uploads.
# Verification (boto3, bench/sinks/s3_tool.py): every picomq run's objects hold offsets 0..N-1
# exactly once; every baseline run uploads as many objects and bytes as the reference run wrote.
#
# Knobs:
#   BENCH_S3_OBJECT_BYTES=64MiB   the sink's max_object_bytes (rotation, before compression)
#   BENCH_S3_UPLOADS=4            the sink's max_uploads_in_flight = boto3's threads
#   BENCH_S3_COMPRESSION=gzip     the sink's compression
#   BENCH_S3_COMPRESSION_LEVEL=0  the sink's compression_level (0: its default, gzip objects 1); the
#                                 baseline uploads the reference run's objects, so the same bytes
#   BENCH_S3_BUFFER_RECORDS=      runtime.max_buffered_records (and max_buffered_bytes 256MiB); unset:
#                                 the runtime's defaults (100,000 records, 64 MiB: since ABI 2.3's
#                                 release an object is not held as records, docs/sinks/s3.md)
#   BENCH_S3_PART_SIZE=16MiB      the sink's part_size (objects above it, compressed, are multipart)

SINK_PLUGIN=libpicomq_connector_s3_sink
S3_OBJECT_BYTES="${BENCH_S3_OBJECT_BYTES:-64MiB}"
S3_UPLOADS="${BENCH_S3_UPLOADS:-4}"
S3_COMPRESSION="${BENCH_S3_COMPRESSION:-gzip}"
S3_BUFFER_RECORDS="${BENCH_S3_BUFFER_RECORDS:-}"
S3_PART_SIZE="${BENCH_S3_PART_SIZE:-16MiB}"
S3_LEVEL="${BENCH_S3_COMPRESSION_LEVEL:-0}"
bench_require_positive BENCH_S3_UPLOADS "$S3_UPLOADS"
s3_buffer="the runtime's default buffer"
if [[ -n "$S3_BUFFER_RECORDS" ]]; then
  bench_require_positive BENCH_S3_BUFFER_RECORDS "$S3_BUFFER_RECORDS"
  SINK_RUNTIME_SETTINGS="max_buffered_records = $S3_BUFFER_RECORDS
max_buffered_bytes = \"256MiB\""
  s3_buffer="runtime buffer $S3_BUFFER_RECORDS records / 256MiB"
fi
SINK_DESCRIPTION="s3 sink: $S3_COMPRESSION (level $S3_LEVEL) JSON lines with the metadata envelope, objects rotated at $S3_OBJECT_BYTES (before compression), parts of $S3_PART_SIZE, $S3_UPLOADS uploads at once, $s3_buffer, to SeaweedFS"
SINK_TARGET="boto3:0.8"
SINK_BASELINES=("boto3|s3_baseline_boto3")
s3_dir=""
s3_endpoint=""
s3_python="$repo/tools/venv/bin/python"
s3_tool="$repo/bench/sinks/s3_tool.py"

sink_check() {
  "$s3_python" -c 'import boto3, zstandard' 2>/dev/null || { echo "boto3 is missing in tools/venv: run scripts/setup.sh" >&2; exit 2; }
  [[ -x "${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/seaweedfs-4.48/weed" ]] ||
    { echo "SeaweedFS is not built: run scripts/setup.sh (sinks/s3/fetch-seaweedfs.sh)" >&2; exit 2; }
}

sink_server_start() {
  s3_dir="$work/seaweedfs"
  s3_endpoint="http://127.0.0.1:$(bash "$repo/sinks/s3/server.sh" start "$s3_dir" --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinks/s3/server.sh stop $s3_dir")
  bench_server_pid="$(cat "$s3_dir/server.pid")"
  log "SeaweedFS S3 at $s3_endpoint (pid $bench_server_pid)"
}

s3_bucket() { echo "bench-$1-$2-$3" | tr '[:upper:]_' '[:lower:]-'; }  # KIND LABEL RUN

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'bucket = "%s"\nendpoint = "%s"\naws_access_key_id = "picomq-test"\naws_secret_access_key = "picomq-test-secret"\n' \
    "$s3_current" "$s3_endpoint"
  printf 'compression = "%s"\ncompression_level = %s\nmax_object_bytes = "%s"\nmax_uploads_in_flight = %s\npart_size = "%s"\n' \
    "$S3_COMPRESSION" "$S3_LEVEL" "$S3_OBJECT_BYTES" "$S3_UPLOADS" "$S3_PART_SIZE"
}

sink_prepare() {  # KIND LABEL RUN
  s3_current="$(s3_bucket "$1" "$2" "$3")"
  "$s3_python" "$s3_tool" "$s3_endpoint" "$s3_current" mkbucket
}

sink_verify() {  # KIND LABEL RUN
  local got
  got="$("$s3_python" "$s3_tool" "$s3_endpoint" "$s3_current" verify)"
  if [[ "$1" == baseline ]]; then
    [[ "${got%% records=*}" == "$s3_expected_objects" ]] ||
      { echo "$2 run $3: uploaded ${got%% records=*}, the reference run wrote $s3_expected_objects" >&2; return 1; }
  else
    [[ "$got" == *" records=$N offsets=$N 0 $((N - 1))" ]] ||
      { echo "$2 run $3: the objects hold $got, not offsets 0..$((N - 1)) once each" >&2; return 1; }
  fi
  echo "${got%% records=*}" | tr ' ' '\n' | sed 's/^/s3_/' | tr '\n' ' '
}

sink_reference_loaded() {
  s3_expected_objects="$("$s3_python" "$s3_tool" "$s3_endpoint" "$s3_current" verify)"
  s3_expected_objects="${s3_expected_objects%% records=*}"
  s3_files="$work/s3-objects"
  "$s3_python" "$s3_tool" "$s3_endpoint" "$s3_current" download "$s3_files"
  log "reference objects: $s3_expected_objects"
}

s3_baseline_boto3() {  # RUN
  bench_timed /dev/null boto3 -- "$s3_python" "$s3_tool" "$s3_endpoint" "$s3_current" upload "$s3_files" "$S3_UPLOADS"
}

sink_notes() {
  echo "SeaweedFS 4.48 (sinks/s3/server.sh: weed server -s3, one process, data in the work dir); reference objects: $s3_expected_objects"
  echo "baseline: boto3 put_object of the reference run's object files (already JSON + $S3_COMPRESSION), the same keys, $S3_UPLOADS threads; it does not consume, encode or compress"
}
