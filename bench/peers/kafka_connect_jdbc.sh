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
# Prints ONE line of JSON on stdout (bench/peers/peer_lib.sh: wall_s, startup_s, load_s, cpu_s,
# load_cpu_s, rss_kb, server_cpu_s with PEER_SERVER_PID) with "batch_size", "max_poll_records",
# "payload". Rows are polled every PEER_POLL_MS (150) ms over one psql session: while loading with an
# index-only look at max(__connect_offset) for TOPIC/partition 0 (rows commit one transaction per
# batch in offset order, so max+1 rows are there), confirmed by an exact count(*) = N at the end.
# Exits 1 with a message when the worker or its task dies, or when TABLE does not hold N rows within
# PEER_TIMEOUT_S seconds (default 300 + N/1000).
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
#   KC_CONNECTOR_EXTRA   extra connector property lines, e.g. "dialect.postgres.unnest.insert.enabled=true"
#   KC_HEAP_OPTS, KC_JVM_OPTS, KC_LOG_LEVEL, KC_DISCOVERY: the worker's (bench/peers/kafka_connect_lib.sh)
#   PEER_SERVER_PID, PEER_POLL_MS, PEER_TIMEOUT_S: bench/peers/peer_lib.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

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
  batch_size=500; KC_MAX_POLL_RECORDS="${KC_MAX_POLL_RECORDS:-500}"   # the connector's and the consumer's defaults
  batch_line="# batch.size: the connector's default (500)"
else
  [[ "$batch_size" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_jdbc: KC_BATCH_SIZE must be a positive integer or default" >&2; exit 2; }
  KC_MAX_POLL_RECORDS="${KC_MAX_POLL_RECORDS:-$batch_size}"
  batch_line="batch.size=$batch_size"
fi
payload="${KC_PAYLOAD:-jsonb}"
[[ "$payload" == jsonb || "$payload" == text ]] || { echo "kafka_connect_jdbc: KC_PAYLOAD must be jsonb or text" >&2; exit 2; }

# shellcheck source=bench/peers/peer_lib.sh
source "$here/peer_lib.sh"
peer_init kafka-connect-jdbc
# shellcheck source=bench/peers/kafka_connect_lib.sh
source "$here/kafka_connect_lib.sh"

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

kc_setup debezium-connector-jdbc "$work"
# The topic holds plain JSON text without a schema envelope: the value arrives as a STRING.
kc_worker "key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter"
kc_connector io.debezium.connector.jdbc.JdbcSinkConnector "\
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
# is wrapped as the one field \"payload\" of a struct: one row per record, the JSON text in the
# column payload (jsonb or text: KC_PAYLOAD).
transforms=wrap
transforms.wrap.type=org.apache.kafka.connect.transforms.HoistField\$Value
transforms.wrap.field=payload
${KC_CONNECTOR_EXTRA:-}"

# --- one psql session for the polling
coproc PSQL { exec psql -X -qAt 2>&1; }
# shellcheck disable=SC2153  # PSQL_PID is set by coproc
peer_cleanup_hooks+=("kill $PSQL_PID 2>/dev/null")
psql_in=${PSQL[1]}; psql_out=${PSQL[0]}
# query SQL...: sends psql input lines, reads one answer line into $answer
query() {
  printf '%s\n' "$@" >&"$psql_in"
  IFS= read -r -t 30 answer <&"$psql_out" || die "psql did not answer"
  [[ "$answer" =~ ^-?[0-9]+$ ]] || die "psql: $answer"
}
# count_rows: max(__connect_offset)+1 of TOPIC partition 0 (an index look-up; -1 before the table
# exists), and once that reaches N the exact count(*)
count_rows() {
  query "SELECT to_regclass('public.$table') IS NOT NULL AS kc_exists \\gset" '\if :kc_exists' \
        "SELECT coalesce(max(__connect_offset) + 1, 0) FROM public.$table WHERE __connect_topic = '$topic' AND __connect_partition = 0;" \
        '\else' 'SELECT -1;' '\endif'
  count="$answer"
  if ((count >= n)); then
    query "SELECT count(*) FROM public.$table;"
    count="$answer"
  fi
}

log "$topic -> $pg_host:$pg_port/$pg_db table $table (payload $payload), batch.size=$batch_size, max.poll.records=$kc_max_poll"
kc_start
peer_wait "$n" count_rows kc_failed
peer_report kafka-connect-debezium-jdbc ",\"batch_size\":$batch_size,\"max_poll_records\":$kc_max_poll,\"payload\":\"$payload\""
