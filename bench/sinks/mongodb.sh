# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the MongoDB sink (libpicomq_connector_mongodb_sink) against a raw client,
# pymongo's insert_many(ordered=False), loading the same documents into the same server. Sourced by
# bench/sink_bench.sh; the interface is described in bench/sinks/postgres.sh and bench/README.md.
#
# The server is FerretDB v1.24.2 on PostgreSQL 15 (sinks/mongodb/server.sh; there is no mongod
# here, and no mongoimport). The reference run lets the sink write its documents (_id = record id,
# pico_* metadata, the payload's fields); they are then dumped as BSON (untimed), and the baseline
# inserts that dump into an empty collection with pymongo (tools/venv, scripts/setup.sh): raw BSON
# documents (RawBSONDocument: no decoding or re-encoding in Python), insert_many(ordered=False) in
# chunks of BENCH_MONGO_CHUNK documents, one connection — what the sink does with its defaults (one
# bulk write at a time of up to max_batch_records). Every run is checked: the count, and the
# number of distinct pico_offset values (the peer's: distinct _id values), counted in FerretDB's
# PostgreSQL (seconds at 1M; through FerretDB, minutes).
#
# BENCH_PEER=1 adds Kafka Connect 4.1.1 (the worker the other peers use) + mongo-kafka-connect 2.0.1
# (bench/peers/kafka_connect_mongo.sh): _id = topic-partition-offset, inserts, unordered.
#
# Knobs:
#   BENCH_MONGO_COMMIT_INTERVAL=200ms  the sink's commit_interval
#   BENCH_MONGO_CHUNK=20000            the sink's max_batch_records and the baseline's chunk
#   BENCH_MONGO_METADATA=true          the sink's include_metadata; false: the payload's fields and
#                                      _id alone, the peer's document shape (bench/peers.sh sets it)

SINK_PLUGIN=libpicomq_connector_mongodb_sink
MONGO_COMMIT_INTERVAL="${BENCH_MONGO_COMMIT_INTERVAL:-200ms}"
MONGO_CHUNK="${BENCH_MONGO_CHUNK:-20000}"
MONGO_METADATA="${BENCH_MONGO_METADATA:-true}"
[[ "$MONGO_METADATA" == true || "$MONGO_METADATA" == false ]] || { echo "BENCH_MONGO_METADATA must be true or false" >&2; exit 2; }
MONGO_DB=bench
MONGO_COLL=bench_target
SINK_TARGET="pymongo:0.8"
SINK_DESCRIPTION="mongodb sink defaults (_id = record id, include_metadata $MONGO_METADATA, unordered bulk inserts): one bulk write of up to $MONGO_CHUNK documents (commit_interval $MONGO_COMMIT_INTERVAL)"
SINK_BASELINES=("pymongo|mongo_baseline_pymongo")
# BENCH_PEER=1: Kafka Connect + MongoDB's own sink connector on the same topic into the same server.
mongo_peer_script="$repo/bench/peers/kafka_connect_mongo.sh"
SINK_PEERS=("kafka-connect-mongodb|mongo_peer_kafka_connect")
mongo_dir=""
mongo_port=""
mongo_py="$repo/tools/venv/bin/python"

mongo_eval() {  # PYTHON: runs it with `db` bound to the bench database, prints what it prints
  "$mongo_py" - "$mongo_port" "$MONGO_DB" "$1" <<'PY'
import sys, pymongo
client = pymongo.MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/", serverSelectionTimeoutMS=10000)
db = client[sys.argv[2]]
exec(sys.argv[3])
PY
}

sink_check() {
  "$mongo_py" -c 'import pymongo' 2>/dev/null || { echo "no pymongo in tools/venv: run scripts/setup.sh" >&2; exit 2; }
  bash "$repo/sinks/mongodb/build-ferretdb.sh" >/dev/null || { echo "no FerretDB: run scripts/setup.sh" >&2; exit 2; }
}

sink_server_start() {
  mongo_dir="$work/ferretdb"
  mongo_port="$(bash "$repo/sinks/mongodb/server.sh" start "$mongo_dir" --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinks/mongodb/server.sh stop $mongo_dir")
  bench_server_pid="$(cat "$mongo_dir/ferretdb.pid")"
  log "FerretDB $(mongo_eval 'print(client.server_info()["version"])') (MongoDB wire) on 127.0.0.1:$mongo_port (pid $bench_server_pid; PostgreSQL 15 behind it, not counted in server CPU)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'connection_uri = "mongodb://127.0.0.1:%s/"\ndatabase = "%s"\ncollection = "%s"\ncommit_interval = "%s"\nmax_batch_records = %s\ninclude_metadata = %s\n' \
    "$mongo_port" "$MONGO_DB" "$MONGO_COLL" "$MONGO_COMMIT_INTERVAL" "$MONGO_CHUNK" "$MONGO_METADATA"
}

sink_prepare() {  # KIND LABEL RUN
  mongo_eval "db.drop_collection('$MONGO_COLL')"
}

mongo_pg() {  # SQL: runs it in FerretDB's PostgreSQL, prints the unaligned result
  psql -h 127.0.0.1 -p "$(cat "$mongo_dir/pg_port")" -U postgres -d postgres -At -v ON_ERROR_STOP=1 -c "$1"
}

sink_verify() {  # KIND LABEL RUN
  local got field=pico_offset table
  # The peer's documents (_id "topic-partition-offset") and the sink's without metadata (_id the
  # record id, "topic:partition:offset") have no pico_offset: their distinct _ids then.
  [[ "$1" == peer || "$MONGO_METADATA" == false ]] && field=_id
  # The count and the distinct values are taken in FerretDB's PostgreSQL, where FerretDB 1.24
  # keeps a database as a schema and each collection as a table of one jsonb column (_jsonb), the
  # table named in the schema's _ferretdb_database_metadata: through FerretDB, reading one field
  # of 1M documents back takes ~5 minutes (its distinct / $group longer); here seconds.
  table="$(mongo_pg "SELECT _jsonb->>'table' FROM \"$MONGO_DB\"._ferretdb_database_metadata WHERE _jsonb->>'_id' = '$MONGO_COLL'")"
  [[ -n "$table" ]] || { echo "$2 run $3: no collection $MONGO_DB.$MONGO_COLL in FerretDB's metadata" >&2; return 1; }
  got="$(mongo_pg "SELECT count(*) || ' ' || count(DISTINCT _jsonb->'$field') FROM \"$MONGO_DB\".\"$table\"")"
  [[ "$got" == "$N $N" ]] || { echo "$2 run $3: $MONGO_COLL holds $got (documents, distinct offsets), not $N $N" >&2; return 1; }
  echo "documents=${got% *}"
}

# After the reference load: its documents, dumped as BSON, are the baseline's input. Not timed.
sink_reference_loaded() {
  mongo_input="$work/mongo-input.bson"
  mongo_eval "
import bson
from bson.raw_bson import RawBSONDocument
coll = db.get_collection('$MONGO_COLL', codec_options=bson.CodecOptions(document_class=RawBSONDocument))
with open('$mongo_input', 'wb') as f:
    for d in coll.find({}, sort=[('_id', 1)], batch_size=10000):
        f.write(d.raw)
"
  log "reference documents: $(du -sh "$mongo_input" | cut -f1) of BSON"
}

mongo_baseline_pymongo() {
  bench_timed /dev/null pymongo -- "$mongo_py" -c '
import sys, pymongo, bson
from bson.raw_bson import RawBSONDocument
port, db, coll, path, chunk = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
docs = list(bson.decode_file_iter(open(path, "rb"), codec_options=bson.CodecOptions(document_class=RawBSONDocument)))
c = pymongo.MongoClient(f"mongodb://127.0.0.1:{port}/")[db][coll]
for i in range(0, len(docs), chunk):
    c.insert_many(docs[i:i + chunk], ordered=False)
' "$mongo_port" "$MONGO_DB" "$MONGO_COLL" "$mongo_input" "$MONGO_CHUNK"
}

# Kafka Connect + mongo-kafka-connect 2.0.1 (bench/peers/kafka_connect_mongo.sh): same topic, the
# same collection (dropped first by sink_prepare). The script prints one JSON line.
mongo_peer_kafka_connect() {
  KC_PG_CONN="host=127.0.0.1 port=$(cat "$mongo_dir/pg_port") user=postgres dbname=postgres" \
    bench_peer kafka-connect-mongodb "$work/peer-kafka-connect-r$1" -- bash "$mongo_peer_script" \
    "$bootstrap" "$TOPIC" "$N" "mongodb://127.0.0.1:$mongo_port/" "$MONGO_DB" "$MONGO_COLL" "$work/peer-kafka-connect-r$1"
}

sink_notes() {
  echo "FerretDB v1.24.2 on PostgreSQL 15 (sinks/mongodb/server.sh); server CPU is FerretDB's alone (PostgreSQL does the storage work and is not counted)"
  echo "baseline: pymongo $("$mongo_py" -c 'import pymongo; print(pymongo.version)') insert_many(ordered=False) of the reference documents as raw BSON (read from a file into memory first, inside the timed process), chunks of $MONGO_CHUNK, one connection"
}
