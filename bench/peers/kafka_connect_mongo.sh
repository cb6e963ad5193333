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
# Prints ONE line of JSON on stdout (bench/peers/peer_lib.sh's fields) with "max_poll_records".
# Documents are counted every PEER_POLL_MS (150) ms with pymongo (tools/venv) over one connection,
# or in FerretDB's PostgreSQL (KC_PG_CONN).
#
# Connector configuration, chosen to do what the picomq sink does with its defaults:
#   document.id.strategy = KafkaMetaDataStrategy (_id "topic-partition-offset": a replay writes the
#     same _id, like the sink's record id; the connector's default, BsonOidStrategy, duplicates on
#     replay), writemodel.strategy = InsertOneDefaultStrategy (inserts; its default is a
#     replace-one upsert), bulk.write.ordered = false, value.converter = JsonConverter without
#     schemas (the record's JSON object becomes the document), errors.tolerance none.
# Knobs: KC_MAX_POLL_RECORDS (1000: the records one put() gets, the connector's bulk size with
#   max.batch.size 0), KC_HEAP_OPTS, KC_JVM_OPTS, KC_LOG_LEVEL (bench/peers/kafka_connect_lib.sh),
#   PEER_SERVER_PID, PEER_POLL_MS, PEER_TIMEOUT_S (bench/peers/peer_lib.sh), KC_PG_CONN
#   (FerretDB's PostgreSQL: count the documents there, see count_docs_pg).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$here/../../tools/venv/bin/python"

if (($# != 7)); then
  echo "usage: $0 BOOTSTRAP TOPIC N MONGO_URI DB COLLECTION WORKDIR" >&2; exit 2
fi
bootstrap="$1"; topic="$2"; n="$3"; uri="$4"; db="$5"; coll="$6"; work="$7"
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "kafka_connect_mongo: N must be a positive integer" >&2; exit 2; }
[[ "$topic" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "kafka_connect_mongo: bad topic name" >&2; exit 2; }
# mongo-kafka-connect 2.0.1 has no ServiceLoader manifests: the worker must scan its jars.
KC_DISCOVERY="${KC_DISCOVERY:-hybrid_warn}"

# shellcheck source=bench/peers/peer_lib.sh
source "$here/peer_lib.sh"
peer_init kafka-connect-mongo
# shellcheck source=bench/peers/kafka_connect_lib.sh
source "$here/kafka_connect_lib.sh"

"$py" -c 'import pymongo' 2>/dev/null || die "no pymongo in tools/venv (scripts/setup.sh)"
kc_setup mongo-kafka-connect "$work"
kc_worker "key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false"
kc_connector com.mongodb.kafka.connect.MongoSinkConnector "\
connection.uri=$uri
database=$db
collection=$coll
document.id.strategy=com.mongodb.kafka.connect.sink.processor.id.strategy.KafkaMetaDataStrategy
writemodel.strategy=com.mongodb.kafka.connect.sink.writemodel.strategy.InsertOneDefaultStrategy
bulk.write.ordered=false
max.batch.size=0"

# One pymongo connection for the counting: a line in, the count out.
coproc COUNTER { exec "$py" -u -c '
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)[sys.argv[2]][sys.argv[3]]
c.drop()
print("ready", flush=True)
for _ in sys.stdin:
    print(c.estimated_document_count(), flush=True)
' "$uri" "$db" "$coll" 2>&1; }
peer_cleanup_hooks+=("kill $COUNTER_PID 2>/dev/null")
counter_in=${COUNTER[1]}; counter_out=${COUNTER[0]}
IFS= read -r -t 30 answer <&"$counter_out" || die "pymongo did not start"
[[ "$answer" == ready ]] || die "pymongo: $answer"
count_docs() {
  if [[ -n "$pg_conn" ]]; then count_docs_pg; return; fi
  printf 'x\n' >&"$counter_in"
  IFS= read -r -t 30 answer <&"$counter_out" || die "pymongo did not answer"
  [[ "$answer" =~ ^[0-9]+$ ]] || die "pymongo: $answer"
  count="$answer"
}
# KC_PG_CONN (libpq conninfo of the PostgreSQL behind FerretDB 1.24): count there instead. Through
# FerretDB a count reads every document (~10 s per 200k), so polling it loads the very server
# being measured; the collection's table is counted by peer_pg_count (peer_lib.sh).
pg_conn="${KC_PG_CONN:-}"
pg_table=""
count_docs_pg() {
  if [[ -z "$pg_table" ]]; then
    pg_table="$(psql "$pg_conn" -X -qAt -c "SELECT _jsonb->>'table' FROM \"$db\"._ferretdb_database_metadata WHERE _jsonb->>'_id' = '$coll'" 2>/dev/null || true)"
    [[ -n "$pg_table" ]] || { count=0; return; }
  fi
  peer_pg_count "$pg_conn" "\"$db\".\"$pg_table\""
}

log "$topic -> $db.$coll, max.poll.records=$kc_max_poll"
kc_start
peer_wait "$n" count_docs kc_failed
peer_report kafka-connect-mongodb ",\"max_poll_records\":$kc_max_poll"
