#!/usr/bin/env bash
# Peer system for the MongoDB sink benchmark: Apache Kafka Connect (standalone worker) with
# MongoDB's own sink connector (org.mongodb.kafka:mongo-kafka-connect:2.0.1), writing TOPIC into
# DB.COLLECTION of a MongoDB-wire server.
#
#   kafka_connect_mongo.sh BOOTSTRAP TOPIC N MONGO_URI DB COLLECTION WORKDIR
#     BOOTSTRAP   Kafka bootstrap servers
#     TOPIC       topic of schemaless JSON records (value only, bench/gen_records.py), read from the
#                 beginning (a new connector name, hence a new consumer group, every run)
#     N           records to wait for (the documents expected in COLLECTION)
#     MONGO_URI   mongodb://HOST:PORT/
#     DB, COLLECTION  the target; COLLECTION is dropped first
#     WORKDIR     worker + connector properties, offsets file, log4j2 config, connect.log
#
# Prints ONE line of JSON on stdout, the same fields as kafka_connect_jdbc.sh:
#   {"system":"kafka-connect-mongodb","records":N,"wall_s":..,"load_s":..,"cpu_s":..,"rss_kb":..,
#    "startup_s":..,"load_cpu_s":..,"max_poll_records":..[,"server_cpu_s":..]}
# wall_s: JVM launch -> N documents counted; startup_s: launch -> the first document; cpu_s: the
# JVM's utime+stime; rss_kb: its VmHWM. Documents are counted every KC_POLL_MS (150) ms with
# pymongo (tools/venv) over one connection, or in FerretDB's PostgreSQL (KC_PG_CONN).
#
# Connector configuration, chosen to do what the picomq sink does with its defaults:
#   document.id.strategy = KafkaMetaDataStrategy (_id "topic-partition-offset": a replay writes the
#     same _id, like the sink's record id; the connector's default, BsonOidStrategy, duplicates on
#     replay), writemodel.strategy = InsertOneDefaultStrategy (inserts; its default is a
#     replace-one upsert), bulk.write.ordered = false, value.converter = JsonConverter without
#     schemas (the record's JSON object becomes the document), errors.tolerance none.
# Knobs: KC_MAX_POLL_RECORDS (1000: the records one put() gets, the connector's bulk size with
#   max.batch.size 0), KC_HEAP_OPTS, KC_JVM_OPTS, KC_LOG_LEVEL, KC_TIMEOUT_S, KC_POLL_MS,
#   KC_SERVER_PID (the server's pid: also report server_cpu_s of its process tree), KC_PG_CONN
#   (FerretDB's PostgreSQL: count the documents there, see count_docs_pg).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kc="$repo/tools/kafka-connect"
py="$repo/tools/venv/bin/python"

if (($# != 7)); then
  echo "usage: $0 BOOTSTRAP TOPIC N MONGO_URI DB COLLECTION WORKDIR" >&2; exit 2
fi
bootstrap="$1"; topic="$2"; n="$3"; uri="$4"; db="$5"; coll="$6"; work="$7"
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_mongo: N must be a positive integer" >&2; exit 2; }
[[ "$topic" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "kafka_connect_mongo: bad topic name" >&2; exit 2; }
max_poll="${KC_MAX_POLL_RECORDS:-1000}"
heap_opts="${KC_HEAP_OPTS:--Xms256m -Xmx2g}"
jvm_opts="${KC_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
poll_ms="${KC_POLL_MS:-150}"
timeout_s="${KC_TIMEOUT_S:-$((300 + n / 1000))}"
log_level="${KC_LOG_LEVEL:-INFO}"

log() { printf '[kafka-connect-mongo %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

"$py" -c 'import pymongo' 2>/dev/null || die "no pymongo in tools/venv (scripts/setup.sh)"
"$kc/fetch-kafka-connect.sh" >&2
[[ -f "$kc/libs/.complete" && -d "$kc/libs/plugins/mongo-kafka-connect" ]] || die "tools/kafka-connect/libs is incomplete"

mkdir -p "$work"
work="$(cd "$work" && pwd)"
rm -f "$work/connect.offsets" "$work/connect.log"
connector="pico-bench-mongo-$(date +%s%N)"
cat > "$work/worker.properties" <<PROPS
# Kafka Connect standalone worker (written by bench/peers/kafka_connect_mongo.sh)
bootstrap.servers=$bootstrap
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false
offset.storage.file.filename=$work/connect.offsets
offset.flush.interval.ms=10000
plugin.path=$kc/libs/plugins
plugin.discovery=hybrid_warn
listeners=http://127.0.0.1:0
consumer.max.poll.records=$max_poll
consumer.auto.offset.reset=earliest
PROPS
cat > "$work/connector.properties" <<PROPS
# MongoDB's sink connector (written by bench/peers/kafka_connect_mongo.sh)
name=$connector
connector.class=com.mongodb.kafka.connect.MongoSinkConnector
tasks.max=1
topics=$topic
connection.uri=$uri
database=$db
collection=$coll
document.id.strategy=com.mongodb.kafka.connect.sink.processor.id.strategy.KafkaMetaDataStrategy
writemodel.strategy=com.mongodb.kafka.connect.sink.writemodel.strategy.InsertOneDefaultStrategy
bulk.write.ordered=false
max.batch.size=0
PROPS
cat > "$work/log4j2.properties" <<L4J
rootLogger.level=$log_level
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
L4J

# One pymongo connection for the counting: a line in, the count out.
coproc COUNTER { exec "$py" -u -c '
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)[sys.argv[2]][sys.argv[3]]
c.drop()
print("ready", flush=True)
for _ in sys.stdin:
    print(c.estimated_document_count(), flush=True)
' "$uri" "$db" "$coll" 2>&1; }
counter_pid=$COUNTER_PID
counter_in=${COUNTER[1]}; counter_out=${COUNTER[0]}
IFS= read -r -t 30 answer <&"$counter_out" || die "pymongo did not start"
[[ "$answer" == ready ]] || die "pymongo: $answer"
count_docs() {
  if [[ -n "$pg_conn" ]]; then count_docs_pg; return; fi
  printf 'x\n' >&"$counter_in"
  IFS= read -r -t 30 answer <&"$counter_out" || die "pymongo did not answer"
  [[ "$answer" =~ ^[0-9]+$ ]] || die "pymongo: $answer"
  docs="$answer"
}
# KC_PG_CONN (libpq conninfo of the PostgreSQL behind FerretDB 1.24): count there instead. Through
# FerretDB a count reads every document (~10 s per 200k), so polling it loads the very server
# being measured; PostgreSQL's statistics of the collection's table (n_tup_ins, cheap, at most ~1 s
# behind) are polled until they reach N, then the exact count(*) until it is N.
pg_conn="${KC_PG_CONN:-}"
pg_table=""
pg_sql() { psql "$pg_conn" -At -v ON_ERROR_STOP=1 -c "$1"; }
count_docs_pg() {
  if [[ -z "$pg_table" ]]; then
    pg_table="$(pg_sql "SELECT _jsonb->>'table' FROM \"$db\"._ferretdb_database_metadata WHERE _jsonb->>'_id' = '$coll'" 2>/dev/null || true)"
    [[ -n "$pg_table" ]] || { docs=0; return; }
  fi
  answer="$(pg_sql "SELECT n_tup_ins FROM pg_stat_user_tables WHERE schemaname = '$db' AND relname = '$pg_table'")"
  if [[ "$answer" =~ ^[0-9]+$ ]] && ((answer >= n)); then
    answer="$(pg_sql "SELECT count(*) FROM \"$db\".\"$pg_table\"")"
  elif [[ "$answer" =~ ^[0-9]+$ ]] && ((answer > 0)); then
    answer=1  # documents are there; not yet all (their exact number is not needed before)
  fi
  [[ "$answer" =~ ^[0-9]+$ ]] || die "psql: $answer"
  docs="$answer"
}

jvm_pid=""
cleanup() {
  local rc=$?
  if [[ -n "$jvm_pid" ]] && kill -0 "$jvm_pid" 2>/dev/null; then
    kill -TERM "$jvm_pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$jvm_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$jvm_pid" 2>/dev/null || true
    wait "$jvm_pid" 2>/dev/null || true
  fi
  if [[ -n "${counter_pid:-}" ]]; then kill "$counter_pid" 2>/dev/null || true; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

clk_tck="$(getconf CLK_TCK)"
cpu_s() {
  local stat; stat="$(cat "/proc/$1/stat")"; stat="${stat##*) }"
  local -a f; read -r -a f <<< "$stat"
  awk -v u="${f[11]}" -v s="${f[12]}" -v t="$clk_tck" 'BEGIN { printf "%.2f", (u + s) / t }'
}
tree_cpu() {
  python3 - "$1" <<'PY'
import os, sys
root = int(sys.argv[1]); kids = {}; cpu = {}
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        s = open(f"/proc/{d}/stat").read()
    except OSError:
        continue
    f = s[s.rindex(")") + 2:].split()
    kids.setdefault(int(f[1]), []).append(int(d))
    cpu[int(d)] = sum(int(x) for x in f[11:15])
total, todo = 0, [root]
while todo:
    p = todo.pop(); total += cpu.get(p, 0); todo += kids.get(p, [])
print(f"{total / os.sysconf('SC_CLK_TCK'):.2f}")
PY
}
hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

log "connector $connector: $topic -> $db.$coll, max.poll.records=$max_poll"
server_pid="${KC_SERVER_PID:-}"
if [[ -n "$server_pid" ]]; then
  kill -0 "$server_pid" 2>/dev/null || die "KC_SERVER_PID $server_pid is not a running process"
  server_cpu0="$(tree_cpu "$server_pid")"
fi
t_start="$(now)"
# shellcheck disable=SC2086
java $heap_opts $jvm_opts -Dlog4j2.configurationFile="$work/log4j2.properties" \
  -cp "$kc/libs/runtime/*" org.apache.kafka.connect.cli.ConnectStandalone \
  "$work/worker.properties" "$work/connector.properties" > "$work/connect.log" 2>&1 &
jvm_pid=$!

t_first=""; cpu_first=""; docs=0; polls=0
deadline="$(awk -v a="$t_start" -v t="$timeout_s" 'BEGIN { printf "%.0f", a + t }')"
sleep_s="$(awk -v m="$poll_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
while :; do
  kill -0 "$jvm_pid" 2>/dev/null || { tail -40 "$work/connect.log" >&2; die "the Connect worker exited (log: $work/connect.log)"; }
  count_docs
  if [[ -z "$t_first" ]] && ((docs > 0)); then
    t_first="$(now)"; cpu_first="$(cpu_s "$jvm_pid")"
    log "first documents after $(elapsed "$t_start" "$t_first") s"
  fi
  ((docs >= n)) && break
  polls=$((polls + 1))
  if ((polls % 20 == 0)); then
    if grep -q -E 'unrecoverable exception|Task is being killed' "$work/connect.log"; then
      grep -E -A20 'unrecoverable exception' "$work/connect.log" | head -60 >&2
      die "the connector task failed (log: $work/connect.log)"
    fi
    (($(date +%s) > deadline)) && die "$coll holds $docs of $n documents after ${timeout_s}s (log: $work/connect.log)"
  fi
  sleep "$sleep_s"
done
t_end="$(now)"
cpu_end="$(cpu_s "$jvm_pid")"; rss="$(hwm_kb "$jvm_pid")"
server_field=""
if [[ -n "$server_pid" ]]; then
  server_field=",\"server_cpu_s\":$(awk -v a="$server_cpu0" -v b="$(tree_cpu "$server_pid")" 'BEGIN { printf "%.2f", b - a }')"
fi
((docs == n)) || die "$coll holds $docs documents, expected $n"
log "all $n documents after $(elapsed "$t_start" "$t_end") s; stopping the worker"
printf '{"system":"kafka-connect-mongodb","records":%d,"wall_s":%s,"load_s":%s,"cpu_s":%s,"rss_kb":%d,"startup_s":%s,"load_cpu_s":%s,"max_poll_records":%d%s}\n' \
  "$n" "$(elapsed "$t_start" "$t_end")" "$(elapsed "$t_first" "$t_end")" "$cpu_end" "$rss" \
  "$(elapsed "$t_start" "$t_first")" "$(awk -v a="$cpu_first" -v b="$cpu_end" 'BEGIN { printf "%.2f", b - a }')" \
  "$max_poll" "$server_field"
