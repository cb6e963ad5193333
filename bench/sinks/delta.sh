# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the Delta Lake sink (libpicomq_connector_delta_sink, Rust on delta-rs)
# appending the orders shape to a Delta table on the local filesystem, against the deltalake
# Python package's write_deltalake appending the very same rows (the reference run's table,
# dumped to an Arrow IPC file) to a fresh table with the same target file size and codec, in
# one commit. Sourced by bench/sink_bench.sh; the interface is described in bench/sinks/postgres.sh.
#
# The baseline does less than the sink: its rows are already an Arrow table in memory (mapped
# from the IPC file), so it measures Parquet encoding and the Delta commit alone; the sink
# consumes from Kafka, decodes JSON, exports Arrow, conforms, encodes and commits per window.
# Verification (deltalake): every picomq run's table holds offsets 0..N-1 exactly once; every
# baseline table holds N rows.
#
# Knobs:
#   BENCH_DELTA_ROLL_RECORDS=400000   the sink's roll_records (records per commit)
#   BENCH_DELTA_FILE_BYTES=128MiB     the sink's roll_bytes (target file size)
#   BENCH_DELTA_COMPRESSION=zstd      the sink's compression = the baseline's
#   BENCH_DELTA_BUFFER_RECORDS=400000 runtime.max_buffered_records (writes stay pending until a commit)
#   BENCH_DELTA_EXTRA=                more plugin_config lines for the sink, e.g. 'dictionary = false'

SINK_PLUGIN=libpicomq_connector_delta_sink
DELTA_ROLL="${BENCH_DELTA_ROLL_RECORDS:-400000}"
DELTA_FILE_BYTES="${BENCH_DELTA_FILE_BYTES:-128MiB}"
DELTA_COMPRESSION="${BENCH_DELTA_COMPRESSION:-zstd}"
DELTA_BUFFER="${BENCH_DELTA_BUFFER_RECORDS:-400000}"
bench_require_positive BENCH_DELTA_ROLL_RECORDS "$DELTA_ROLL"
SINK_RUNTIME_SETTINGS="max_buffered_records = $DELTA_BUFFER
max_buffered_bytes = \"256MiB\""
SINK_DESCRIPTION="delta sink: orders shape, inferred columns conformed to the table, $DELTA_COMPRESSION Parquet, roll_records $DELTA_ROLL, roll_bytes $DELTA_FILE_BYTES, local filesystem"
SINK_TARGET="write_deltalake:0.8"
SINK_BASELINES=("write_deltalake|delta_baseline_write")
# BENCH_PEER=1 (bench/peers.sh): what a user writes instead, bench/peers/python_delta.py —
# confluent-kafka -> json.loads -> pyarrow -> write_deltalake, offsets committed after each write,
# the sink's commit cadence and file size. The baseline above is the encoding floor (its rows are
# already Arrow in memory); this one consumes and decodes as the sink does.
SINK_PEERS=("python-deltalake|delta_peer_python")
delta_python="$repo/tools/venv/bin/python"
delta_tool="$repo/bench/sinks/delta_tool.py"
delta_current=""

sink_check() {
  "$delta_python" -c 'import deltalake, pyarrow' 2>/dev/null || { echo "deltalake is missing in tools/venv: run scripts/setup.sh" >&2; exit 2; }
  [[ -f "$plugins/$SINK_PLUGIN.so" ]] || { echo "$plugins/$SINK_PLUGIN.so is not built (cargo: scripts/build.sh)" >&2; exit 2; }
}

sink_server_start() { :; }

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'table_uri = "%s"\nroll_records = %s\nroll_bytes = "%s"\ncompression = "%s"\ncommit_interval = "60s"\n%s\n' \
    "$delta_current" "$DELTA_ROLL" "$DELTA_FILE_BYTES" "$DELTA_COMPRESSION" "${BENCH_DELTA_EXTRA:-}"
}

sink_prepare() {  # KIND LABEL RUN
  delta_current="$work/delta-$1-${2//\//-}-$3"
  rm -rf "$delta_current"
  "$delta_python" "$delta_tool" create "$delta_current"
}

sink_verify() {  # KIND LABEL RUN
  local got
  if [[ "$1" == baseline ]]; then got="$("$delta_python" "$delta_tool" verify "$delta_current" "$N")" || return 1
  else got="$("$delta_python" "$delta_tool" verify "$delta_current" "$N" exact)" || return 1; fi
  echo "$got" | tr ' ' '\n' | sed 's/^/delta_/' | tr '\n' ' '
  [[ "$1" == reference ]] || rm -rf "$delta_current"   # a timed run's table goes once verified (the disk is shared)
}

sink_reference_loaded() {
  delta_input="$work/delta-rows.arrow"
  "$delta_python" "$delta_tool" dump "$delta_current" "$delta_input"
  delta_reference="$("$delta_python" "$delta_tool" verify "$delta_current" "$N")"
  local files="${delta_reference#*files=}" bytes="${delta_reference#*bytes=}"
  files="${files%% *}"
  delta_file_bytes=$(( bytes / (files > 0 ? files : 1) ))
  log "reference table: $delta_reference; baseline target_file_size $delta_file_bytes"
}

delta_baseline_write() {  # RUN
  bench_timed /dev/null write_deltalake -- "$delta_python" "$delta_tool" write "$delta_current" "$delta_input" "$delta_file_bytes" "$DELTA_COMPRESSION"
}

delta_peer_python() {  # RUN
  bench_peer python-deltalake "$work/peer-python-r$1" -- "$delta_python" "$repo/bench/peers/python_delta.py" "$bootstrap" \
    "$TOPIC" "$N" "$delta_current" "$DELTA_ROLL" "$delta_file_bytes" "$DELTA_COMPRESSION" "bench-peer-python-delta-r$1"
}

sink_notes() {
  [[ "${BENCH_PEER:-0}" == 1 ]] && echo "peer python-deltalake: bench/peers/python_delta.py (confluent-kafka $("$delta_python" -c 'import confluent_kafka; print(confluent_kafka.version()[0])'), json.loads, pyarrow, write_deltalake) with roll $DELTA_ROLL records per commit, target_file_size $delta_file_bytes, $DELTA_COMPRESSION; offsets committed after each write (at least once)"
  echo "reference table: $delta_reference (the sink's files); baseline: write_deltalake (deltalake $("$delta_python" -c 'import deltalake; print(deltalake.__version__)')) of the same rows from an Arrow IPC file, target_file_size = the sink's mean file size, one commit"
}
