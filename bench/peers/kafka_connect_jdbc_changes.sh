#!/usr/bin/env bash
# Peer system for bench/changes.sh: Apache Kafka Connect (standalone worker) with the Debezium JDBC
# sink connector applying Debezium change events (inserts, updates, deletes, tombstones) to a
# replica table of PostgreSQL by key, until the replica equals the source.
#
#   kafka_connect_jdbc_changes.sh BOOTSTRAP TOPIC N JDBC_URL TABLE WORKDIR EXPECTED
#     BOOTSTRAP  Kafka bootstrap servers, e.g. 127.0.0.1:9092
#     TOPIC      Debezium's topic of one table (JsonConverter with schemas: {"schema","payload"}
#                keys and values), read from offset 0 (a new connector name, hence a new
#                consumer group, every run)
#     N          the change events on TOPIC (the "records" reported)
#     JDBC_URL   jdbc:postgresql://HOST[:PORT]/DB[?user=U[&password=P][&other JDBC options]]
#     TABLE      the replica table (public schema): DROPPED first, then created by the connector
#                (schema.evolution=basic: its columns from the events' schema, its primary key
#                from the record key)
#     WORKDIR    worker + connector properties, offsets file, log4j2 config, connect.log
#     EXPECTED   the source's checksum (bench/peers/changes_lib.sh: "<rows> <md5>")
#
# Prints ONE line of JSON on stdout (bench/peers/peer_lib.sh's fields: wall_s, startup_s, load_s,
# cpu_s, load_cpu_s, rss_kb, server_cpu_s with PEER_SERVER_PID) with "equal" (whether the replica
# ended equal to the source), "batch_size", "max_poll_records", "reduction_buffer". The clock stops
# when the replica equals the source (changes_lib.sh: the sentinel row's last change, then the
# checksum). Exits 1 when the worker or its task dies, or on PEER_TIMEOUT_S (300 + N/1000).
#
# The connector, as a user replicating a table with it configures it: insert.mode=upsert,
# delete.enabled=true (a delete event and its tombstone delete the row), primary.key.mode=record_key,
# schema.evolution=basic, the Debezium envelope read natively (no ExtractNewRecordState).
# Knobs:
#   KC_BATCH_SIZE        the connector's batch.size                                      (1000)
#   KC_MAX_POLL_RECORDS  the worker's consumer.max.poll.records: the records one put() gets; the
#                        connector flushes what it holds at the end of every put()   (= KC_BATCH_SIZE)
#   KC_REDUCTION_BUFFER  use.reduction.buffer: the events of one key within a flush reduced to its
#                        last state (as our sink keeps the last change per key of a batch); the
#                        connector's default is false                                    (true)
#   KC_CONNECTOR_EXTRA   extra connector property lines
#   KC_HEAP_OPTS, KC_JVM_OPTS, KC_LOG_LEVEL, KC_OFFSET_FLUSH_MS: the worker's (kafka_connect_lib.sh)
#   PEER_SERVER_PID, PEER_POLL_MS, PEER_TIMEOUT_S: peer_lib.sh; CHANGES_SETTLE_S: changes_lib.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if (($# != 7)); then
  echo "usage: $0 BOOTSTRAP TOPIC N JDBC_URL TABLE WORKDIR EXPECTED" >&2; exit 2
fi
bootstrap="$1"; topic="$2"; n="$3"; jdbc_url="$4"; table="$5"; work="$6"; expected="$7"
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_jdbc_changes: N must be a positive integer" >&2; exit 2; }
[[ "$table" =~ ^[a-z_][a-z0-9_]*$ ]] ||
  { echo "kafka_connect_jdbc_changes: TABLE must be a lower-case unquoted identifier ([a-z_][a-z0-9_]*)" >&2; exit 2; }
[[ "$topic" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "kafka_connect_jdbc_changes: bad topic name" >&2; exit 2; }
batch_size="${KC_BATCH_SIZE:-1000}"
[[ "$batch_size" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_jdbc_changes: KC_BATCH_SIZE must be a positive integer" >&2; exit 2; }
KC_MAX_POLL_RECORDS="${KC_MAX_POLL_RECORDS:-$batch_size}"
reduction="${KC_REDUCTION_BUFFER:-true}"
[[ "$reduction" == true || "$reduction" == false ]] ||
  { echo "kafka_connect_jdbc_changes: KC_REDUCTION_BUFFER must be true or false" >&2; exit 2; }

# shellcheck source=bench/peers/peer_lib.sh
source "$here/peer_lib.sh"
peer_init kafka-connect-jdbc-changes
# shellcheck source=bench/peers/kafka_connect_lib.sh
source "$here/kafka_connect_lib.sh"
# shellcheck source=bench/peers/changes_lib.sh
source "$here/changes_lib.sh"

# --- JDBC URL -> psql connection (host, port, db, user, password; other JDBC options ignored)
[[ "$jdbc_url" =~ ^jdbc:postgresql://([^/:?]+)(:([0-9]+))?/([^?]+)(\?(.*))?$ ]] ||
  die "JDBC_URL must look like jdbc:postgresql://HOST[:PORT]/DB[?user=U&password=P]: $jdbc_url"
pg_host="${BASH_REMATCH[1]}"; pg_port="${BASH_REMATCH[3]:-5432}"; pg_db="${BASH_REMATCH[4]}"
pg_user=""; pg_password=""
IFS='&' read -r -a url_params <<< "${BASH_REMATCH[6]}"
for kv in ${url_params[@]+"${url_params[@]}"}; do
  case "$kv" in user=*) pg_user="${kv#user=}" ;; password=*) pg_password="${kv#password=}" ;; esac
done
export PGHOST="$pg_host" PGPORT="$pg_port" PGDATABASE="$pg_db"
[[ -n "$pg_user" ]] && export PGUSER="$pg_user"
[[ -n "$pg_password" ]] && export PGPASSWORD="$pg_password"
command -v psql >/dev/null || die "psql not found (postgresql-client)"
psql -X -qAt -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS public.$table" >&2 ||
  die "cannot reach PostgreSQL at $pg_host:$pg_port/$pg_db (or drop table $table)"

kc_setup debezium-connector-jdbc "$work"
# Debezium's events as its JsonConverter wrote them, schemas included: the connector needs the
# schemas to build rows and create the table.
kc_worker "key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=true"
kc_connector io.debezium.connector.jdbc.JdbcSinkConnector "\
connection.url=$jdbc_url
${pg_user:+connection.username=$pg_user}
${pg_password:+connection.password=$pg_password}
# Apply the changes by key: upsert the after state of c/r/u events, delete on d events and
# tombstones (delete.enabled needs primary.key.mode=record_key).
insert.mode=upsert
delete.enabled=true
primary.key.mode=record_key
schema.evolution=basic
collection.name.format=$table
batch.size=$batch_size
use.reduction.buffer=$reduction
${KC_CONNECTOR_EXTRA:-}"

changes_connect "postgresql://${pg_user:+$pg_user@}$pg_host:$pg_port/$pg_db" "$table" "$expected" "$n"
log "$topic -> $pg_host:$pg_port/$pg_db table $table, batch.size=$batch_size, max.poll.records=$kc_max_poll, use.reduction.buffer=$reduction"
kc_start
peer_wait "$n" changes_count kc_failed
peer_report kafka-connect-debezium-jdbc-changes \
  ",\"equal\":$changes_equal,\"replica\":\"$changes_replica_sum\",\"batch_size\":$batch_size,\"max_poll_records\":$kc_max_poll,\"reduction_buffer\":$reduction"
