# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the Meilisearch sink into its contract server
# (sinks/meilisearch/tests/meilisearch_contract.py, Python; no real Meilisearch exists here) with
# tasks processed at once (processing_delay 0). No baseline: what it measures is the sink's own
# rate and CPU per record against a server that answers at once (the server's CPU is reported
# apart); it says nothing of a real Meilisearch's indexing speed. Verification: the index holds N
# documents with N distinct offsets.
#
# Knobs: BENCH_MEILI_RECORDS=10000 (max_request_records), BENCH_MEILI_IN_FLIGHT=8 (max_in_flight)

SINK_PLUGIN=libpicomq_connector_meilisearch_sink
MEILI_RECORDS="${BENCH_MEILI_RECORDS:-10000}"
MEILI_IN_FLIGHT="${BENCH_MEILI_IN_FLIGHT:-8}"
SINK_DESCRIPTION="meilisearch sink: NDJSON documents (flat, record ids), up to $MEILI_RECORDS per task, $MEILI_IN_FLIGHT batches pending, into the contract server (tasks processed at once)"
SINK_TARGET=""
meili_port=""

sink_server_start() {
  local out="$work/meili.port"
  python3 "$repo/sinks/meilisearch/tests/meilisearch_contract.py" > "$out" 2> "$work/meili.log" &
  bench_server_pid=$!
  bench_cleanup_hooks+=("kill $bench_server_pid")
  for _ in $(seq 100); do [[ -s "$out" ]] && break; sleep 0.05; done
  meili_port="$(head -1 "$out")"
  curl -sf -XPOST "http://127.0.0.1:$meili_port/_control/config" -d '{"processing_delay": 0}' > /dev/null
  log "Meilisearch contract server on 127.0.0.1:$meili_port (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'url = "http://127.0.0.1:%s"\nindex = "bench"\nmax_request_records = %s\nmax_in_flight = %s\n' \
    "$meili_port" "$MEILI_RECORDS" "$MEILI_IN_FLIGHT"
}

sink_prepare() { curl -sf -XPOST "http://127.0.0.1:$meili_port/_control/reset" -d '{}' > /dev/null &&
  curl -sf -XPOST "http://127.0.0.1:$meili_port/_control/config" -d '{"processing_delay": 0}' > /dev/null; }

sink_verify() {  # KIND LABEL RUN
  local counts
  counts="$(curl -sf "http://127.0.0.1:$meili_port/indexes/bench/documents?limit=100000000" |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["results"]; print(len(d), len({(x["pico_partition"], x["pico_offset"]) for x in d}))')"
  [[ "$counts" == "$N $N" ]] || { echo "$2 run $3: documents / distinct offsets $counts, expected $N" >&2; return 1; }
  echo "rows=$N"
}

sink_notes() { echo "Destination: the Meilisearch contract server (Python), tasks processed at once: the sink's own overhead, not Meilisearch's speed."; }
