#!/usr/bin/env bash
# Peer system for the PostgreSQL sink benchmark: Apache Kafka Connect (standalone worker) with the
# Debezium JDBC sink connector, writing TOPIC into TABLE of a PostgreSQL database.
#
#   kafka_connect_jdbc.sh BOOTSTRAP TOPIC N JDBC_URL TABLE WORKDIR
#     BOOTSTRAP  Kafka bootstrap servers, e.g. 127.0.0.1:9092
#     TOPIC      topic of schemaless JSON records (value only, bench/gen_records.py), read from the
#                beginning (a new connector name, hence a new consumer group, every run)
#     N          records to wait for (the rows expected in TABLE)
#     JDBC_URL   jdbc:postgresql://HOST[:PORT]/DB[?user=U[&password=P][&other JDBC options]]
#     TABLE      target table (public schema): DROPPED first, then created (see KC_PAYLOAD)
#     WORKDIR    worker + connector properties, offsets file, log4j2 config, connect.log
#
# Prints ONE line of JSON on stdout:
#   {"system":"kafka-connect-debezium-jdbc","records":N,"wall_s":..,"load_s":..,"cpu_s":..,
#    "rss_kb":..,"startup_s":..,"load_cpu_s":..,"batch_size":..,"max_poll_records":..,"payload":..[,"server_cpu_s":..]}
#   wall_s     from launching the JVM to all N rows visible in TABLE
#   startup_s  from launching the JVM to the first row visible
#   load_s     from the first row visible to all N rows visible (wall_s - startup_s)
#   cpu_s      the Connect JVM's utime+stime (/proc/PID/stat) when all N rows are there, JVM start
#              included; load_cpu_s: the part of it spent after the first row was seen
#   rss_kb     the JVM's peak RSS (VmHWM) at that moment
# Rows are polled every KC_POLL_MS (150) ms over one psql session: while loading with an index-only
# look at max(__connect_offset) for TOPIC/partition 0 (rows commit one transaction per batch in
# offset order, so max+1 rows are there), confirmed by an exact count(*) = N at the end. Logs go to
# stderr and WORKDIR/connect.log; exits 1 with a message when the worker or its task dies, or when
# TABLE does not hold N rows within KC_TIMEOUT_S seconds (default 300 + N/1000).
#
# Each record becomes one row: (__connect_topic, __connect_partition, __connect_offset) as the
# primary key (primary.key.mode=kafka) and the record's JSON text in the column "payload".
#
# Environment knobs (defaults are what bench/peers/README.md reports):
#   KC_PAYLOAD           jsonb: this script creates TABLE with payload jsonb and the connector's
#                        connection URL gets stringtype=unspecified, so PostgreSQL parses each
#                        JSON text into jsonb (like our sink's default payload_mode = "jsonb");
#                        text: the connector creates TABLE itself (schema.evolution=basic), payload
#                        text (like our payload_mode = "text")                          (jsonb)
#   KC_BATCH_SIZE        the connector's batch.size; "default" leaves it (500) and
#                        consumer.max.poll.records (500) unset                   (1000)
#   KC_MAX_POLL_RECORDS  the worker's consumer.max.poll.records: the records one put() gets; the
#                        connector flushes what it holds at the end of every put(), so its batches
#                        are at most min(batch.size, this)                       (= KC_BATCH_SIZE)
#   KC_HEAP_OPTS         (-Xms256m -Xmx2g: Kafka's connect-standalone default KAFKA_HEAP_OPTS)
#   KC_JVM_OPTS          (-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
#                        -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true: Kafka's
#                        default KAFKA_JVM_PERFORMANCE_OPTS)
#   KC_CONNECTOR_EXTRA   extra connector property lines, e.g. "dialect.postgres.unnest.insert.enabled=true"
#   KC_LOG_LEVEL         log4j2 root level (INFO)
#   KC_SERVER_PID        the postmaster's pid (a local server): also report "server_cpu_s", the CPU
#                        seconds its process tree (postmaster + backends, utime+stime+cutime+cstime
#                        of the live ones, as bench/bench_helper.c --server counts) spent from the
#                        JVM's launch to all N rows (the row polling's own queries are in it: one
#                        index look-up per KC_POLL_MS)
# The jars come from tools/kafka-connect/libs (tools/kafka-connect/fetch-kafka-connect.sh, run here
# when they are missing).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kc="$repo/tools/kafka-connect"

if (($# != 6)); then
  echo "usage: $0 BOOTSTRAP TOPIC N JDBC_URL TABLE WORKDIR" >&2; exit 2
fi
bootstrap="$1"; topic="$2"; n="$3"; jdbc_url="$4"; table="$5"; work="$6"
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_jdbc: N must be a positive integer" >&2; exit 2; }
[[ "$table" =~ ^[a-z_][a-z0-9_]*$ ]] ||
  { echo "kafka_connect_jdbc: TABLE must be a lower-case unquoted identifier ([a-z_][a-z0-9_]*)" >&2; exit 2; }
[[ "$topic" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "kafka_connect_jdbc: bad topic name" >&2; exit 2; }

batch_size="${KC_BATCH_SIZE:-1000}"
if [[ "$batch_size" == default ]]; then
  batch_size=500; max_poll="${KC_MAX_POLL_RECORDS:-500}"   # the connector's and the consumer's defaults
  batch_line="# batch.size: the connector's default (500)"
else
  [[ "$batch_size" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_jdbc: KC_BATCH_SIZE must be a positive integer or default" >&2; exit 2; }
  max_poll="${KC_MAX_POLL_RECORDS:-$batch_size}"
  batch_line="batch.size=$batch_size"
fi
heap_opts="${KC_HEAP_OPTS:--Xms256m -Xmx2g}"
jvm_opts="${KC_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
poll_ms="${KC_POLL_MS:-150}"
timeout_s="${KC_TIMEOUT_S:-$((300 + n / 1000))}"
log_level="${KC_LOG_LEVEL:-INFO}"
payload="${KC_PAYLOAD:-jsonb}"
[[ "$payload" == jsonb || "$payload" == text ]] || { echo "kafka_connect_jdbc: KC_PAYLOAD must be jsonb or text" >&2; exit 2; }

log() { printf '[kafka-connect-jdbc %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# --- JDBC URL -> psql connection (host, port, db, user, password; other JDBC options ignored)
[[ "$jdbc_url" =~ ^jdbc:postgresql://([^/:?]+)(:([0-9]+))?/([^?]+)(\?(.*))?$ ]] ||
  die "JDBC_URL must look like jdbc:postgresql://HOST[:PORT]/DB[?user=U&password=P]: $jdbc_url"
pg_host="${BASH_REMATCH[1]}"; pg_port="${BASH_REMATCH[3]:-5432}"; pg_db="${BASH_REMATCH[4]}"
pg_user=""; pg_password=""
IFS='&' read -r -a url_params <<< "${BASH_REMATCH[6]}"
for kv in "${url_params[@]}"; do
  case "$kv" in user=*) pg_user="${kv#user=}" ;; password=*) pg_password="${kv#password=}" ;; esac
done
export PGHOST="$pg_host" PGPORT="$pg_port" PGDATABASE="$pg_db"
[[ -n "$pg_user" ]] && export PGUSER="$pg_user"
[[ -n "$pg_password" ]] && export PGPASSWORD="$pg_password"
command -v psql >/dev/null || die "psql not found (postgresql-client)"
psql -X -qAt -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS public.$table" >&2 ||
  die "cannot reach PostgreSQL at $pg_host:$pg_port/$pg_db (or drop table $table)"
connector_url="$jdbc_url"
if [[ "$payload" == jsonb ]]; then
  # The table the connector would create for primary.key.mode=kafka (same names, types and key),
  # but with payload jsonb. The connector binds the payload as a string: stringtype=unspecified
  # makes the PostgreSQL JDBC driver send it untyped, so the server converts it to the column type.
  psql -X -qAt -v ON_ERROR_STOP=1 -c "CREATE TABLE public.$table (
      __connect_topic text NOT NULL, __connect_partition integer NOT NULL, __connect_offset bigint NOT NULL,
      payload jsonb, PRIMARY KEY (__connect_topic, __connect_partition, __connect_offset))" >&2 ||
    die "cannot create table $table"
  if [[ "$connector_url" == *\?* ]]; then connector_url+="&stringtype=unspecified"; else connector_url+="?stringtype=unspecified"; fi
fi

# --- jars
"$kc/fetch-kafka-connect.sh" >&2
[[ -f "$kc/libs/.complete" ]] || die "tools/kafka-connect/libs is incomplete"

# --- worker + connector configuration
mkdir -p "$work"
work="$(cd "$work" && pwd)"
rm -f "$work/connect.offsets" "$work/connect.log"
connector="pico-bench-jdbc-$(date +%s%N)"     # a new consumer group: the topic is read from offset 0
cat > "$work/worker.properties" <<PROPS
# Kafka Connect standalone worker (written by bench/peers/kafka_connect_jdbc.sh)
bootstrap.servers=$bootstrap
# The topic holds plain JSON text without a schema envelope: the value arrives as a STRING.
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
offset.storage.file.filename=$work/connect.offsets
offset.flush.interval.ms=10000
plugin.path=$kc/libs/plugins
# Every plugin here has ServiceLoader manifests (the worker says so under the default hybrid_warn,
# which also scans all jars by reflection: some 17 s of extra start-up on this machine).
plugin.discovery=service_load
# REST API on loopback, any free port (nothing here uses it).
listeners=http://127.0.0.1:0
# One put() hands the task at most this many records; the connector's batches are at most that big.
consumer.max.poll.records=$max_poll
consumer.auto.offset.reset=earliest
PROPS
cat > "$work/connector.properties" <<PROPS
# Debezium JDBC sink (written by bench/peers/kafka_connect_jdbc.sh)
name=$connector
connector.class=io.debezium.connector.jdbc.JdbcSinkConnector
tasks.max=1
topics=$topic
connection.url=$connector_url
${pg_user:+connection.username=$pg_user}
${pg_password:+connection.password=$pg_password}
insert.mode=insert
# Key each row by its Kafka coordinates: columns __connect_topic, __connect_partition,
# __connect_offset form the primary key (our sink's insert mode keys by topic:partition:offset).
primary.key.mode=kafka
# Let the connector create the table (as our sink's auto_create_table does; KC_PAYLOAD=text) or
# check the one this script made (KC_PAYLOAD=jsonb).
schema.evolution=basic
collection.name.format=$table
$batch_line
# The connector needs a struct with a schema. Each plain-JSON value (a STRING from StringConverter)
# is wrapped as the one field "payload" of a struct: one row per record, the JSON text in the
# column payload (jsonb or text: KC_PAYLOAD).
transforms=wrap
transforms.wrap.type=org.apache.kafka.connect.transforms.HoistField\$Value
transforms.wrap.field=payload
${KC_CONNECTOR_EXTRA:-}
PROPS
cat > "$work/log4j2.properties" <<L4J
rootLogger.level=$log_level
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
L4J

# --- one psql session for the polling
coproc PSQL { exec psql -X -qAt 2>&1; }
# shellcheck disable=SC2153  # PSQL_PID is set by coproc
psql_pid=$PSQL_PID
psql_in=${PSQL[1]}; psql_out=${PSQL[0]}
# query SQL...: sends psql input lines, reads one answer line into $answer
query() {
  printf '%s\n' "$@" >&"$psql_in"
  IFS= read -r -t 30 answer <&"$psql_out" || die "psql did not answer"
}
# rows_hint: max(__connect_offset)+1 of TOPIC partition 0 (an index look-up), -1 before the table exists
rows_hint() {
  query "SELECT to_regclass('public.$table') IS NOT NULL AS kc_exists \\gset" '\if :kc_exists' \
        "SELECT coalesce(max(__connect_offset) + 1, 0) FROM public.$table WHERE __connect_topic = '$topic' AND __connect_partition = 0;" \
        '\else' 'SELECT -1;' '\endif'
  [[ "$answer" =~ ^-?[0-9]+$ ]] || die "psql: $answer"
  rows="$answer"
}
count_rows() {
  query "SELECT count(*) FROM public.$table;"
  [[ "$answer" =~ ^[0-9]+$ ]] || die "psql: $answer"
  rows="$answer"
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
  if [[ -n "${psql_pid:-}" ]]; then kill "$psql_pid" 2>/dev/null || true; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

clk_tck="$(getconf CLK_TCK)"
# cpu_s PID: utime+stime in seconds (fields 14 and 15 of /proc/PID/stat, after the "(comm)")
cpu_s() {
  local stat; stat="$(cat "/proc/$1/stat")"; stat="${stat##*) }"
  local -a f; read -r -a f <<< "$stat"
  awk -v u="${f[11]}" -v s="${f[12]}" -v t="$clk_tck" 'BEGIN { printf "%.2f", (u + s) / t }'
}
# tree_cpu PID: CPU seconds of the process tree of PID (utime+stime+cutime+cstime of each live process)
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

log "connector $connector: $topic -> $pg_host:$pg_port/$pg_db table $table (payload $payload), batch.size=$batch_size, max.poll.records=$max_poll"
log "JVM: $heap_opts $jvm_opts"
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

t_first=""; cpu_first=""; rows=-1; polls=0
deadline="$(awk -v a="$t_start" -v t="$timeout_s" 'BEGIN { printf "%.0f", a + t }')"
sleep_s="$(awk -v m="$poll_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
while :; do
  kill -0 "$jvm_pid" 2>/dev/null || { tail -40 "$work/connect.log" >&2; die "the Connect worker exited (log: $work/connect.log)"; }
  rows_hint
  if [[ -z "$t_first" ]] && ((rows > 0)); then
    t_first="$(now)"; cpu_first="$(cpu_s "$jvm_pid")"
    log "first rows after $(elapsed "$t_start" "$t_first") s"
  fi
  if ((rows >= n)); then
    count_rows
    ((rows >= n)) && break
  fi
  polls=$((polls + 1))
  if ((polls % 20 == 0)); then
    if grep -q -E 'unrecoverable exception|Task is being killed' "$work/connect.log"; then
      grep -E -A20 'unrecoverable exception' "$work/connect.log" | head -60 >&2
      die "the connector task failed (log: $work/connect.log)"
    fi
    if (($(date +%s) > deadline)); then
      die "table $table holds $((rows < 0 ? 0 : rows)) of $n rows after ${timeout_s}s (log: $work/connect.log)"
    fi
  fi
  sleep "$sleep_s"
done
t_end="$(now)"
cpu_end="$(cpu_s "$jvm_pid")"; rss="$(hwm_kb "$jvm_pid")"
server_field=""
if [[ -n "$server_pid" ]]; then
  server_field=",\"server_cpu_s\":$(awk -v a="$server_cpu0" -v b="$(tree_cpu "$server_pid")" 'BEGIN { printf "%.2f", b - a }')"
fi
((rows == n)) || die "table $table holds $rows rows, expected $n"
log "all $n rows after $(elapsed "$t_start" "$t_end") s; stopping the worker"

printf '{"system":"kafka-connect-debezium-jdbc","records":%d,"wall_s":%s,"load_s":%s,"cpu_s":%s,"rss_kb":%d,"startup_s":%s,"load_cpu_s":%s,"batch_size":%d,"max_poll_records":%d,"payload":"%s"%s}\n' \
  "$n" "$(elapsed "$t_start" "$t_end")" "$(elapsed "$t_first" "$t_end")" "$cpu_end" "$rss" \
  "$(elapsed "$t_start" "$t_first")" "$(awk -v a="$cpu_first" -v b="$cpu_end" 'BEGIN { printf "%.2f", b - a }')" \
  "$batch_size" "$max_poll" "$payload" "$server_field"
