# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the Elasticsearch / OpenSearch sink (libpicomq_connector_elasticsearch_sink)
# into a real OpenSearch 2.19.6 node (sinks/elasticsearch/server.sh, heap 512 MB), side by side
# with curl replaying the very same _bulk bodies at the same concurrency into a fresh index of the
# same mapping. Sourced by bench/sink_bench.sh; the interface is described in bench/sinks/postgres.sh
# and bench/README.md.
#
# The reference run lets the sink create its index (record ids, flat documents with the pico_*
# fields, 1 shard, 0 replicas, refresh_interval 30s). Its documents are then read back in _id
# order (scroll, untimed) and cut into _bulk bodies of BENCH_ES_REQUEST_RECORDS documents, exactly
# the action + document lines the sink sent; the baseline is one curl process sending those bodies
# with --parallel --parallel-max BENCH_ES_IN_FLIGHT over kept-alive connections into a fresh index
# created with the reference's settings and mapping. Every run is checked: _count equals N and
# no bulk response had errors.
# BENCH_PEER=1 (bench/peers.sh, OpenSearch only): Telegraf 1.37.2 with outputs.opensearch
# (bench/peers/telegraf.sh opensearch) into the same index name, one document per record (Telegraf's
# metric: tags and fields), the index made with 1 shard, 0 replicas, refresh_interval 1s (its
# count is polled); checked by _count like the others.
#
# Knobs:
#   BENCH_ES_FLAVOR=opensearch       opensearch | elasticsearch (7.10.2)
#   BENCH_ES_IN_FLIGHT=4             the sink's max_in_flight and curl's --parallel-max
#   BENCH_ES_REQUEST_RECORDS=1000    the sink's max_request_records and the baseline's documents per body
#   BENCH_ES_COMPRESSION=none        the sink's compression (none | gzip)

SINK_PLUGIN=libpicomq_connector_elasticsearch_sink
ES_FLAVOR="${BENCH_ES_FLAVOR:-opensearch}"
ES_IN_FLIGHT="${BENCH_ES_IN_FLIGHT:-4}"
ES_REQUEST_RECORDS="${BENCH_ES_REQUEST_RECORDS:-1000}"
ES_COMPRESSION="${BENCH_ES_COMPRESSION:-none}"
ES_INDEX=bench_target
ES_REF=bench_reference
[[ "$ES_FLAVOR" == opensearch ]] && SINK_PEERS=("telegraf-opensearch|es_peer_telegraf")
ES_SETTINGS='{ number_of_shards = 1, number_of_replicas = 0, refresh_interval = "30s" }'
SINK_TARGET="curl-bulk:0.8"
SINK_DESCRIPTION="elasticsearch sink defaults (record ids, action index, flat documents with pico_* fields) into $ES_FLAVOR: _bulk requests of up to $ES_REQUEST_RECORDS documents, $ES_IN_FLIGHT in flight, compression $ES_COMPRESSION"
SINK_BASELINES=("curl-bulk|es_baseline_curl")
bench_require_positive BENCH_ES_IN_FLIGHT "$ES_IN_FLIGHT"
bench_require_positive BENCH_ES_REQUEST_RECORDS "$ES_REQUEST_RECORDS"
es_dir=""
es_port=""

es() {  # METHOD PATH [BODY]: prints the answer; exits 1 unless 2xx
  local out
  out="$(curl -sS --fail-with-body -X "$1" -H 'Content-Type: application/json' "http://127.0.0.1:$es_port$2" ${3:+--data-binary "$3"})" ||
    { echo "$ES_FLAVOR: $1 $2 failed: $out" >&2; exit 1; }
  printf '%s' "$out"
}

sink_check() {
  local cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
  [[ -f "$cache/opensearch-2.19.6/.complete" && -f "$cache/elasticsearch-7.10.2/.complete" ]] ||
    { echo "no OpenSearch / Elasticsearch in $cache: run scripts/setup.sh" >&2; exit 2; }
  [[ "$ES_FLAVOR" =~ ^(opensearch|elasticsearch)$ ]] || { echo "BENCH_ES_FLAVOR must be opensearch or elasticsearch" >&2; exit 2; }
}

sink_server_start() {
  es_dir="$work/$ES_FLAVOR"
  es_port="$(bash "$repo/sinks/elasticsearch/server.sh" start "$es_dir" "$ES_FLAVOR" --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinks/elasticsearch/server.sh stop $es_dir")
  bench_server_pid="$(cat "$es_dir/server.pid")"
  log "$ES_FLAVOR $(es GET / | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"]["number"])') on 127.0.0.1:$es_port (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'url = "http://127.0.0.1:%s"\nindex = "%s"\nmax_in_flight = %s\nmax_request_records = %s\ncompression = "%s"\nindex_settings = %s\n' \
    "$es_port" "$ES_INDEX" "$ES_IN_FLIGHT" "$ES_REQUEST_RECORDS" "$ES_COMPRESSION" "$ES_SETTINGS"
}

sink_prepare() {  # KIND LABEL RUN
  curl -sS -o /dev/null -X DELETE "http://127.0.0.1:$es_port/$ES_INDEX" || true
  case "$1" in
    reference|picomq) ;;   # the sink creates it
    baseline) es PUT "/$ES_INDEX" "$es_template" >/dev/null ;;
  esac
}

sink_verify() {  # KIND LABEL RUN
  local got
  es POST "/$ES_INDEX/_refresh" >/dev/null
  got="$(es GET "/$ES_INDEX/_count" | python3 -c 'import json,sys; print(json.load(sys.stdin)["count"])')"
  [[ "$got" == "$N" ]] || { echo "$2 run $3: $ES_INDEX holds $got documents, not $N" >&2; return 1; }
  if [[ "$1" == baseline ]] && grep -l '"errors":true' "$es_files"/answer.* >/dev/null 2>&1; then
    echo "$2 run $3: a _bulk answer had errors" >&2; return 1
  fi
  echo "documents=$got"
}

es_peer_telegraf() {  # RUN
  TG_BATCH="$ES_REQUEST_RECORDS" bench_peer telegraf-opensearch "$work/peer-telegraf-r$1" -- bash "$repo/bench/peers/telegraf.sh" \
    opensearch "$bootstrap" "$TOPIC" "$N" "$work/peer-telegraf-r$1" "http://127.0.0.1:$es_port" "$ES_INDEX"
}

# After the reference load: the bodies the sink sent, rebuilt from its index; the index's settings
# and mapping for the baseline's fresh index. Not timed.
sink_reference_loaded() {
  es_files="$work/es-inputs"
  mkdir -p "$es_files"
  es POST "/$ES_INDEX/_refresh" >/dev/null
  es_template="$(es GET "/$ES_INDEX" | python3 -c '
import json, sys
index = next(iter(json.load(sys.stdin).values()))
s = index["settings"]["index"]
print(json.dumps({"settings": {"number_of_shards": s["number_of_shards"], "number_of_replicas": s["number_of_replicas"],
                               "refresh_interval": s.get("refresh_interval", "1s")}, "mappings": index["mappings"]}))')"
  python3 - "http://127.0.0.1:$es_port" "$ES_INDEX" "$ES_REQUEST_RECORDS" "$es_files" <<'PY'
import json, sys, urllib.request
base, index, per_body, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def call(path, body):
    r = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r))
docs = []
page = call(f"/{index}/_search?scroll=2m", {"size": 10000, "sort": ["_doc"], "query": {"match_all": {}}})
while page["hits"]["hits"]:
    docs += [(h["_source"]["pico_offset"], h["_id"], h["_source"]) for h in page["hits"]["hits"]]
    page = call("/_search/scroll", {"scroll": "2m", "scroll_id": page["_scroll_id"]})
docs.sort()
with open(f"{out}/curl.cfg", "w") as cfg:
    for n, start in enumerate(range(0, len(docs), per_body)):
        with open(f"{out}/body.{n:06d}", "w") as f:
            for _, doc_id, source in docs[start:start + per_body]:
                f.write(json.dumps({"index": {"_index": index, "_id": doc_id}}, separators=(",", ":")) + "\n")
                f.write(json.dumps(source, separators=(",", ":"), ensure_ascii=False) + "\n")
        cfg.write(("next\n" if n else "") + f'url = "{base}/_bulk?filter_path=errors"\ndata-binary = "@{out}/body.{n:06d}"\n'
                  f'header = "Content-Type: application/x-ndjson"\noutput = "{out}/answer.{n:06d}"\n')
PY
  log "baseline input: $(ls "$es_files"/body.* | wc -l) _bulk bodies, $(cat "$es_files"/body.* | wc -c) bytes"
}

es_baseline_curl() {
  rm -f "$es_files"/answer.*
  bench_timed /dev/null curl-bulk -- curl -sS --fail --parallel --parallel-max "$ES_IN_FLIGHT" -K "$es_files/curl.cfg"
}

sink_notes() {
  [[ "${BENCH_PEER:-0}" == 1 && "$ES_FLAVOR" == opensearch ]] && echo "peer telegraf-opensearch: Telegraf 1.37.2 kafka_consumer -> json parser -> outputs.opensearch (bulk of $ES_REQUEST_RECORDS metrics, one document each; index 1 shard, 0 replicas, refresh 1s); its time: launch to _count = N"
  echo "$ES_FLAVOR (sinks/elasticsearch/server.sh: one node, heap 512 MB, data in the work dir); index: 1 shard, 0 replicas, refresh_interval 30s"
  echo "baseline: one curl process replaying the sink's _bulk bodies (rebuilt from its index in offset order, $ES_REQUEST_RECORDS documents each) with --parallel-max $ES_IN_FLIGHT into a fresh index of the same mapping"
}
