#!/usr/bin/env bash
# Starts / stops a single-node Apache Kafka broker in KRaft mode for the tests.
#   kafka.sh start  <dir> <port>  formats a fresh log dir under <dir>, starts the broker, waits until it answers
#   kafka.sh resume <dir> <port>  starts it again on its existing log dir (after stop): a broker outage
#   kafka.sh stop   <dir>         kills it (a test broker's data needs no clean shutdown)
# PICOMQ_KAFKA_EXTRA_PROPERTIES (a file) is appended to the broker's server.properties (a later key
# wins: e.g. more listeners), PICOMQ_KAFKA_FORMAT_ARGS is added to the storage format (e.g.
# --add-scram users); tests/integration/security_test.cpp starts a SASL_SSL listener with them.
# PICOMQ_KAFKA_JAVA_OPTS is added to the broker's JVM options (the benchmarks' JMX port: bench/lib.sh).
# The broker's jars come from PICOMQ_KAFKA_LIBS (e.g. an Apache Kafka 4.x distribution's libs/)
# or, in this tree, from the machine's server cache by PICOMQ_KAFKA_VERSION: 4.4 (the default,
# what CI runs) or 4.1 (the oldest the docs support; `bash scripts/matrix.sh` runs both), fetched
# once per machine by tools/kafka/fetch-kafka.sh into ~/.cache/picomq/servers/kafka-<x.y.z>/libs.
# Installed with the conformance kit as share/picomq-sdk/testing/kafka.sh (there: PICOMQ_KAFKA_LIBS,
# else share/picomq-sdk/tools/kafka/libs, which does not exist: it says so). Needs Java 17+.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cmd="${1:?start|resume|stop}"; dir="${2:?dir}"
if [[ -n "${PICOMQ_KAFKA_LIBS:-}" ]]; then
  libs="$PICOMQ_KAFKA_LIBS"
elif [[ "$cmd" == resume && -f "$dir/libs" ]]; then
  libs="$(cat "$dir/libs")"   # the jars it was started with
elif [[ "$cmd" == start && -x "$repo/tools/kafka/fetch-kafka.sh" ]]; then
  libs="$("$repo/tools/kafka/fetch-kafka.sh" --libs "${PICOMQ_KAFKA_VERSION:-4.4}")"
else
  libs="$repo/tools/kafka/libs"
fi
export CLASSPATH="$libs/*"
java_opts=(-Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto
           -Dlog4j2.configurationFile="$dir/log4j2.properties")

write_config() {
  local port="$1" controller_port=$(($1 + 1))
  rm -rf "$dir"; mkdir -p "$dir/data"
  cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
# KIP-848 groups: a killed member is dropped after 10 s (the broker's default is 45 s, its
# minimum too), like the classic groups the tests give session.timeout.ms = 10000 (fleet_test).
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.heartbeat.interval.ms=2000
auto.create.topics.enable=true
PROPS
  if [[ -n "${PICOMQ_KAFKA_EXTRA_PROPERTIES:-}" ]]; then cat "$PICOMQ_KAFKA_EXTRA_PROPERTIES" >> "$dir/server.properties"; fi
  cat > "$dir/log4j2.properties" <<'L4J'
rootLogger.level=WARN
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
L4J
  java "${java_opts[@]}" kafka.tools.StorageTool format -t "$(java "${java_opts[@]}" kafka.tools.StorageTool random-uuid)" \
    -c "$dir/server.properties" ${PICOMQ_KAFKA_FORMAT_ARGS:-} > "$dir/format.log" 2>&1 || { cat "$dir/format.log"; exit 1; }
}

# Up when it answers a metadata request (kcat), or, without kcat, when it accepts connections.
answers() {
  if command -v kcat > /dev/null; then kcat -b "127.0.0.1:$1" -L -m 2 > /dev/null 2>&1
  else (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; fi
}

launch_and_wait() {
  local port="$1"
  nohup java "${java_opts[@]}" ${PICOMQ_KAFKA_JAVA_OPTS:-} kafka.Kafka "$dir/server.properties" >> "$dir/broker.log" 2>&1 &
  echo $! > "$dir/broker.pid"
  for _ in $(seq 1 600); do
    if answers "$port"; then echo "kafka: up on 127.0.0.1:$port"; return 0; fi
    kill -0 "$(cat "$dir/broker.pid")" 2>/dev/null || { echo "kafka: broker died"; tail -50 "$dir/broker.log"; exit 1; }
    sleep 0.1
  done
  echo "kafka: broker did not answer within 60s"; tail -50 "$dir/broker.log"; exit 1
}

case "$cmd" in
start)
  if ! compgen -G "$libs/kafka_*.jar" > /dev/null; then
    echo "kafka.sh: no Kafka jars in $libs: set PICOMQ_KAFKA_LIBS to a folder of Kafka's broker jars" \
         "(an Apache Kafka 4.x distribution's libs/), or give the tests a running broker with" \
         "PICOMQ_CONFORMANCE_BOOTSTRAP=host:port" >&2
    exit 1
  fi
  write_config "${3:?port}"
  echo "$libs" > "$dir/libs"
  launch_and_wait "$3"
  ;;
resume)
  launch_and_wait "${3:?port}"
  ;;
stop)
  if [[ -f "$dir/broker.pid" ]]; then
    pid="$(cat "$dir/broker.pid")"
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/broker.pid"
  fi
  ;;
*) echo "usage: $0 start|resume|stop <dir> [port]"; exit 2 ;;
esac
