#!/usr/bin/env bash
# Peer system for the InfluxDB, PostgreSQL and OpenSearch sink benchmarks: Telegraf 1.37.2
# (bench/peers/build-telegraf.sh) with inputs.kafka_consumer and one output, writing TOPIC into the
# destination until it holds N records.
#
#   telegraf.sh influxdb   BOOTSTRAP TOPIC N WORKDIR URL ORG BUCKET TOKEN
#   telegraf.sh postgresql BOOTSTRAP TOPIC N WORKDIR CONNINFO     (table "orders", dropped first)
#   telegraf.sh opensearch BOOTSTRAP TOPIC N WORKDIR URL INDEX    (INDEX deleted first)
#
# Every record becomes one metric, with the mapping the InfluxDB adapter uses: measurement orders,
# tags status / channel / ccy, time from ts in ms, the other fields flattened with _ (Telegraf's json
# parser, with the string fields named: it keeps numbers and booleans only otherwise). The outputs:
#   influxdb    outputs.influxdb_v2 (line protocol), one point per record; counted with a Flux
#               count of the qty field (every order has one)
#   postgresql  outputs.postgresql (pgx, COPY per batch): table orders with a column per tag and
#               field, created by Telegraf; counted by peer_pg_count (peer_lib.sh)
#   opensearch  outputs.opensearch (bulk index, one document per metric: measurement_name, tag,
#               the fields); counted with _count (the index refreshes every second)
# Prints ONE line of JSON on stdout (bench/peers/peer_lib.sh's fields) with "output", "batch".
# Knobs: TG_BATCH (5000: agent.metric_batch_size, the metrics of one write), TG_FLUSH
#   (100ms: agent.flush_interval), PEER_SERVER_PID, PEER_POLL_MS (300), PEER_TIMEOUT_S
#   (bench/peers/peer_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage="usage: $0 influxdb|postgresql|opensearch BOOTSTRAP TOPIC N WORKDIR OUTPUT_ARGS... (see its header)"
(($# >= 6)) || { echo "$usage" >&2; exit 2; }
output="$1"; bootstrap="$2"; topic="$3"; n="$4"; work="$5"
shift 5
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "telegraf: N must be a positive integer" >&2; exit 2; }
batch="${TG_BATCH:-5000}"
export PEER_POLL_MS="${PEER_POLL_MS:-300}"

# shellcheck source=bench/peers/peer_lib.sh
source "$here/peer_lib.sh"
peer_init "telegraf-$output"
bin="$(bash "$here/build-telegraf.sh")"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

case "$output" in
  influxdb)
    (($# == 4)) || { echo "$usage" >&2; exit 2; }
    url="$1"; org="$2"; bucket="$3"; token="$4"
    output_toml="[[outputs.influxdb_v2]]
  urls = [\"$url\"]
  token = \"$token\"
  organization = \"$org\"
  bucket = \"$bucket\"
  content_encoding = \"identity\""
    count_records() {
      count="$(curl -sS -X POST "$url/api/v2/query?org=$org" -H "Authorization: Token $token" \
        -H 'Content-Type: application/vnd.flux' -H 'Accept: application/csv' --data-binary \
        "from(bucket: \"$bucket\") |> range(start: 0) |> filter(fn: (r) => r._measurement == \"orders\" and r._field == \"qty\") |> group() |> count()" |
        python3 -c 'import csv,sys; print(sum(int(r["_value"]) for r in csv.DictReader(sys.stdin) if r.get("_value")))' 2>/dev/null || echo 0)"
    } ;;
  postgresql)
    (($# == 1)) || { echo "$usage" >&2; exit 2; }
    conninfo="$1"
    pg() { PGOPTIONS='-c client_min_messages=warning' psql "$conninfo" -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }
    pg "DROP TABLE IF EXISTS public.orders" >&2 || die "cannot reach PostgreSQL ($conninfo)"
    output_toml="[[outputs.postgresql]]
  connection = \"$conninfo\"
  schema = \"public\"
  ## one table per measurement, tags as columns (not a foreign-key tag table), as COPY batches
  tags_as_foreign_keys = false"
    count_records() { peer_pg_count "$conninfo" public.orders; }
 ;;
  opensearch)
    (($# == 2)) || { echo "$usage" >&2; exit 2; }
    url="$1"; index="$2"
    curl -sS -o /dev/null -X DELETE "$url/$index" || die "cannot reach OpenSearch at $url"
    output_toml="[[outputs.opensearch]]
  urls = [\"$url\"]
  index_name = \"$index\"
  ## the index as the picomq run's: 1 shard, 0 replicas; Telegraf manages no template
  manage_template = false
  template_name = \"telegraf\"
  health_check_interval = \"0s\""
    curl -sS -o /dev/null -f -X PUT "$url/$index" -H 'Content-Type: application/json' \
      -d '{"settings":{"number_of_shards":1,"number_of_replicas":0,"refresh_interval":"1s"}}' ||
      die "cannot create index $index"
    count_records() {
      count="$(curl -sS "$url/$index/_count" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))' 2>/dev/null || echo 0)"
    } ;;
  *) echo "$usage" >&2; exit 2 ;;
esac

cat > "$work/telegraf.conf" <<CONF
[agent]
  interval = "1s"
  flush_interval = "${TG_FLUSH:-100ms}"
  flush_jitter = "0s"
  metric_batch_size = $batch
  metric_buffer_limit = 2000000
  omit_hostname = true
  quiet = true
[[inputs.kafka_consumer]]
  brokers = ["$bootstrap"]
  topics = ["$topic"]
  consumer_group = "telegraf-bench-$(date +%s%N)"
  ## sarama's default protocol version (2.x era) meets "EOF" from Kafka 4.x on fetch: ask for 3.x.
  version = "3.5.0"
  offset = "oldest"
  max_undelivered_messages = 20000
  data_format = "json"
  name_override = "orders"
  tag_keys = ["status", "channel", "ccy"]
  json_string_fields = ["id", "items_*", "ship_to_city"]
  json_time_key = "ts"
  json_time_format = "unix_ms"
$output_toml
CONF

log "$topic -> $output, metric_batch_size $batch"
peer_start "$work/telegraf.log" "$bin" --config "$work/telegraf.conf"
peer_wait "$n" count_records
peer_report "telegraf-$output" ",\"output\":\"$output\",\"batch\":$batch"
