# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the stdout sink (libpicomq_connector_stdout_sink, include_metadata =
# false: each payload on its own line) against `kcat -C -f '%s\n'`, both writing into a file that
# is then checked (N lines, the produced bytes, the same MD5 as the produced records). Sourced by
# bench/sink_bench.sh; the interface is described in bench/sinks/postgres.sh and bench/README.md.
# (bench/stdout_vs_kcat.sh is the fuller stdout benchmark: output to /dev/null, kcat -J, envelopes.)
# BENCH_PEER=1 (bench/peers.sh): Kafka Connect 4.1.1 with Apache Kafka's FileStreamSink writing the
# values into the same file (bench/peers/kafka_connect_file.sh), checked the same way.

SINK_PLUGIN=libpicomq_connector_stdout_sink
SINK_DESCRIPTION="stdout sink, include_metadata = false (payload lines), output to a file"
SINK_TARGET="kcat:1.0"
SINK_BASELINES=("kcat|stdout_baseline_kcat")
SINK_PEERS=("kafka-connect-file|stdout_peer_kafka_connect")
stdout_file=""

sink_records_produced() {
  stdout_md5="$(md5sum < "$records_file" | cut -d' ' -f1)"
  stdout_bytes="$(stat -c %s "$records_file")"
}

sink_plugin_config() { echo "include_metadata = false"; }

sink_prepare() {  # KIND LABEL RUN
  stdout_file="$work/stdout-output.txt"
  rm -f "$stdout_file"
  bench_sink_stdout="$stdout_file"   # where bench_run_sink sends the runtime's stdout
}

sink_verify() {  # KIND LABEL RUN
  local lines bytes md5
  lines="$(wc -l < "$stdout_file")"
  bytes="$(stat -c %s "$stdout_file")"
  md5="$(md5sum < "$stdout_file" | cut -d' ' -f1)"
  rm -f "$stdout_file"
  [[ "$lines" == "$N" && "$bytes" == "$stdout_bytes" && "$md5" == "$stdout_md5" ]] ||
    { echo "$2 run $3: output has $lines lines, $bytes bytes, md5 $md5; expected $N, $stdout_bytes, $stdout_md5" >&2; return 1; }
  echo "rows=$lines"
}

stdout_baseline_kcat() {
  bench_timed "$stdout_file" kcat -- kcat -C -b "$bootstrap" -t "$TOPIC" -o beginning -c "$N" -e -q -f '%s\n'
}

stdout_peer_kafka_connect() {  # RUN
  bench_peer kafka-connect-file "$work/peer-kafka-connect-r$1" -- bash "$repo/bench/peers/kafka_connect_file.sh" \
    "$bootstrap" "$TOPIC" "$N" "$stdout_file" "$((stdout_bytes))" "$work/peer-kafka-connect-r$1"
}

sink_notes() {
  [[ "${BENCH_PEER:-0}" == 1 ]] && echo "peer kafka-connect-file: Kafka Connect 4.1.1 standalone + FileStreamSink (StringConverter, max.poll.records ${KC_MAX_POLL_RECORDS:-1000}) into the same file; its time: JVM launch to the file's N lines"
  printf '%s\n' "kcat: kcat -C -o beginning -c N -e -q -f '%s\\n' > file (no group, no commits); picomq: the stdout sink > file"
}
