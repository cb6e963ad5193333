#!/usr/bin/env bash
# Peer system for the stdout sink benchmark: Apache Kafka Connect (standalone worker) with Apache
# Kafka's own FileStreamSink (org.apache.kafka:connect-file, the worker's version), writing each
# record's value of TOPIC as one line of FILE — what the stdout sink with include_metadata = false
# writes.
#
#   kafka_connect_file.sh BOOTSTRAP TOPIC N FILE BYTES WORKDIR
#     FILE      the output (truncated first); BYTES: its size once it holds the N lines (the
#               produced values plus a newline each), which is when the clock stops
#     WORKDIR   worker + connector properties, offsets file, log4j2 config, connect.log
# Prints ONE line of JSON on stdout (bench/peers/peer_lib.sh's fields) with "max_poll_records".
# The count is FILE's lines, known from its size (stat every PEER_POLL_MS, 150 ms: no read of the
# file while it grows); the adapter checks the lines and their MD5 afterwards.
# The value converter is StringConverter: the JSON text goes out as it came, as the sink's does.
# Knobs: KC_MAX_POLL_RECORDS (1000), KC_HEAP_OPTS, KC_JVM_OPTS, KC_LOG_LEVEL
#   (bench/peers/kafka_connect_lib.sh), PEER_POLL_MS, PEER_TIMEOUT_S (bench/peers/peer_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
(($# == 6)) || { echo "usage: $0 BOOTSTRAP TOPIC N FILE BYTES WORKDIR" >&2; exit 2; }
bootstrap="$1"; topic="$2"; n="$3"; file="$4"; bytes="$5"; work="$6"
[[ "$n" =~ ^[1-9][0-9]*$ && "$bytes" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_file: N and BYTES must be positive integers" >&2; exit 2; }

# shellcheck source=bench/peers/peer_lib.sh
source "$here/peer_lib.sh"
peer_init kafka-connect-file
# shellcheck source=bench/peers/kafka_connect_lib.sh
source "$here/kafka_connect_lib.sh"

: > "$file"
kc_setup "" "$work"   # FileStreamSink is on the worker's class path (connect-file)
kc_worker "key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter"
kc_connector org.apache.kafka.connect.file.FileStreamSinkConnector "\
file=$file"

# Lines in FILE: N once it has all the bytes; 1 as soon as it has any (the first record is there).
count_lines() {
  local size
  size="$(stat -c %s "$file")"
  if ((size >= bytes)); then count="$(wc -l < "$file")"; elif ((size > 0)); then count=1; else count=0; fi
}

log "$topic -> $file, max.poll.records=$kc_max_poll"
kc_start
peer_wait "$n" count_lines kc_failed
peer_report kafka-connect-file ",\"max_poll_records\":$kc_max_poll"
