#!/usr/bin/env bash
# Starts / stops a fresh single-node Apache Kafka broker in KRaft mode for the tests.
#   kafka.sh start <dir> <port>   formats a new log dir under <dir>, starts the broker, waits until it answers
#   kafka.sh stop  <dir>
# The broker's jars come from tools/kafka/libs (scripts/setup.sh fetches them).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
libs="$repo/tools/kafka/libs"
cmd="${1:?start|stop}"; dir="${2:?dir}"

case "$cmd" in
start)
  port="${3:?port}"; controller_port=$((port + 1))
  [[ -f "$libs/.complete" ]] || "$repo/tools/kafka/fetch-kafka.sh"
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
auto.create.topics.enable=true
PROPS
  cat > "$dir/log4j2.properties" <<'L4J'
rootLogger.level=WARN
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
L4J
  export CLASSPATH="$libs/*"
  java_opts=(-Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto
             -Dlog4j2.configurationFile="$dir/log4j2.properties")
  java "${java_opts[@]}" kafka.tools.StorageTool format -t "$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>/dev/null || echo 'pmqc-test-cluster-0001')" \
      -c "$dir/server.properties" > "$dir/format.log" 2>&1 || { cat "$dir/format.log"; exit 1; }
  nohup java "${java_opts[@]}" kafka.Kafka "$dir/server.properties" > "$dir/broker.log" 2>&1 &
  echo $! > "$dir/broker.pid"
  for _ in $(seq 1 600); do
    if kcat -b "127.0.0.1:$port" -L -m 2 >/dev/null 2>&1; then echo "kafka: up on 127.0.0.1:$port"; exit 0; fi
    kill -0 "$(cat "$dir/broker.pid")" 2>/dev/null || { echo "kafka: broker died"; tail -50 "$dir/broker.log"; exit 1; }
    sleep 0.1
  done
  echo "kafka: broker did not answer within 60s"; tail -50 "$dir/broker.log"; exit 1
  ;;
stop)
  if [[ -f "$dir/broker.pid" ]]; then
    pid="$(cat "$dir/broker.pid")"
    # A test broker's data is thrown away: no need to wait for a clean shutdown.
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/broker.pid"
  fi
  ;;
*) echo "usage: $0 start|stop <dir> [port]"; exit 2 ;;
esac
