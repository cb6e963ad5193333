# shellcheck shell=bash
# The Kafka Connect standalone worker every Kafka Connect peer runs the same way (sourced after
# peer_lib.sh): the jars of tools/kafka-connect/fetch-kafka-connect.sh (Maven Central, once per
# machine, cached outside the clone), the worker's properties, log4j2 at KC_LOG_LEVEL, and the JVM
# with Kafka's own connect-standalone.sh defaults.
#
#   kc_setup PLUGIN_DIR WORKDIR    fetch the jars when missing; PLUGIN_DIR (one of the fetched
#                                  plugins; "" for one on the worker's class path) is its plugin.path
#   kc_worker CONVERTER_LINES      writes WORKDIR/worker.properties (converters given by the caller)
#   kc_connector CLASS LINES       writes WORKDIR/connector.properties: the run's name, CLASS, one
#                                  task, the topic, then the connector's own LINES
#   kc_start                       launches the worker with WORKDIR/connector.properties
#   kc_failed                      the connector's task died for good (for peer_wait)
# Knobs: KC_MAX_POLL_RECORDS (1000: the records one put() gets), KC_HEAP_OPTS (-Xms256m -Xmx2g:
# connect-standalone.sh's KAFKA_HEAP_OPTS), KC_JVM_OPTS (its KAFKA_JVM_PERFORMANCE_OPTS),
# KC_OFFSET_FLUSH_MS (10000), KC_LOG_LEVEL (INFO), KC_DISCOVERY (service_load for a plugin with ServiceLoader manifests; the
# worker's default hybrid_warn also scans every jar by reflection: ~17 s and ~0.8 GB more at start
# for Debezium's; mongo-kafka-connect 2.0.1 has none, so its peer sets hybrid_warn).

kc_fetch="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tools/kafka-connect" && pwd)/fetch-kafka-connect.sh"
kc_libs="$(bash "$kc_fetch" --print-dir)"
kc_max_poll="${KC_MAX_POLL_RECORDS:-1000}"

kc_setup() {  # PLUGIN_DIR WORKDIR
  bash "$kc_fetch" >&2 || die "cannot fetch the Kafka Connect jars (tools/kafka-connect/fetch-kafka-connect.sh)"
  [[ -z "$1" || -d "$kc_libs/plugins/$1" ]] || die "$kc_libs/plugins/$1 is missing (tools/kafka-connect/fetch-kafka-connect.sh)"
  mkdir -p "$2"
  kc_work="$(cd "$2" && pwd)"
  rm -rf "$kc_work/connect.offsets" "$kc_work/connect.log" "$kc_work/plugins"
  # The worker's plugin.path holds only this peer's plugin: a worker scanning by reflection (a
  # plugin without ServiceLoader manifests) scans no other peer's jars.
  mkdir -p "$kc_work/plugins"
  if [[ -n "$1" ]]; then ln -s "$kc_libs/plugins/$1" "$kc_work/plugins/$1"; fi
  # A new connector name each run: a new consumer group, so the topic is read from offset 0.
  kc_connector="pico-bench-$peer_name-$(date +%s%N)"
}

kc_worker() {  # CONVERTER_LINES
  cat > "$kc_work/worker.properties" <<PROPS
# Kafka Connect standalone worker (written by bench/peers/kafka_connect_lib.sh for $peer_name)
bootstrap.servers=$bootstrap
$1
offset.storage.file.filename=$kc_work/connect.offsets
# connect-standalone.properties' 10 s: also the longest the worker's poll waits when no record
# comes, so a connector acting on its own timer (Iceberg's commits) may set it to that timer.
offset.flush.interval.ms=${KC_OFFSET_FLUSH_MS:-10000}
plugin.path=$kc_work/plugins
plugin.discovery=${KC_DISCOVERY:-service_load}
# REST API on loopback, any free port (nothing here uses it).
listeners=http://127.0.0.1:0
# One put() hands the task at most this many records.
consumer.max.poll.records=$kc_max_poll
consumer.auto.offset.reset=earliest
PROPS
  cat > "$kc_work/log4j2.properties" <<L4J
rootLogger.level=${KC_LOG_LEVEL:-INFO}
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
L4J
}

kc_connector() {  # CLASS LINES
  cat > "$kc_work/connector.properties" <<PROPS
# $peer_name (written by bench/peers/kafka_connect_lib.sh)
name=$kc_connector
connector.class=$1
tasks.max=1
topics=$topic
$2
PROPS
}

kc_start() {
  local heap="${KC_HEAP_OPTS:--Xms256m -Xmx2g}"
  local jvm="${KC_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
  log "connector $kc_connector; JVM: $heap $jvm"
  # shellcheck disable=SC2086
  peer_start "$kc_work/connect.log" java $heap $jvm -Dlog4j2.configurationFile="$kc_work/log4j2.properties" \
    -cp "$kc_libs/runtime/*" org.apache.kafka.connect.cli.ConnectStandalone \
    "$kc_work/worker.properties" "$kc_work/connector.properties"
}

kc_failed() {
  grep -q -E 'unrecoverable exception|Task is being killed' "$kc_work/connect.log" || return 1
  grep -E -A20 'unrecoverable exception' "$kc_work/connect.log" | head -60 >&2
  return 0
}
