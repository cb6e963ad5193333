# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the Quickwit sink into its contract server
# (sinks/quickwit/tests/quickwit_contract.py, Python; no real Quickwit exists here), commit =
# auto, the index created from index_config. No baseline: it measures the sink's own rate and CPU
# per record against a server that answers at once (the server's CPU is reported apart), nothing
# of a real Quickwit's indexing speed. Verification: after a forced commit the index holds N
# documents with N distinct pico_id.
#
# Knobs: BENCH_QW_IN_FLIGHT=4 (max_in_flight)

SINK_PLUGIN=libpicomq_connector_quickwit_sink
QW_IN_FLIGHT="${BENCH_QW_IN_FLIGHT:-4}"
SINK_DESCRIPTION="quickwit sink: NDJSON ingest (flat, pico_id), 8 MiB / 10000-document requests, $QW_IN_FLIGHT in flight, commit = auto, into the contract server"
SINK_TARGET=""
qw_port=""

sink_server_start() {
  local out="$work/qw.port"
  python3 "$repo/sinks/quickwit/tests/quickwit_contract.py" > "$out" 2> "$work/qw.log" &
  bench_server_pid=$!
  bench_cleanup_hooks+=("kill $bench_server_pid")
  for _ in $(seq 100); do [[ -s "$out" ]] && break; sleep 0.05; done
  qw_port="$(head -1 "$out")"
  log "Quickwit contract server on 127.0.0.1:$qw_port (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'url = "http://127.0.0.1:%s"\nindex = "bench"\nmax_in_flight = %s\nindex_config = { version = "0.8", doc_mapping = { mode = "dynamic" } }\n' \
    "$qw_port" "$QW_IN_FLIGHT"
}

sink_prepare() { curl -sf -XPOST "http://127.0.0.1:$qw_port/_control/reset" -d '{}' > /dev/null; }

sink_verify() {  # KIND LABEL RUN
  local counts
  # An empty forced ingest commits what is pending.
  curl -sf -XPOST "http://127.0.0.1:$qw_port/api/v1/bench/ingest?commit=force" --data-binary '' > /dev/null
  counts="$(curl -sf "http://127.0.0.1:$qw_port/api/v1/bench/search?query=*&max_hits=100000000" |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["hits"]; print(len(d), len({x["pico_id"] for x in d}))')"
  [[ "$counts" == "$N $N" ]] || { echo "$2 run $3: documents / distinct pico_id $counts, expected $N" >&2; return 1; }
  echo "rows=$N"
}

sink_notes() { echo "Destination: the Quickwit contract server (Python), answering at once: the sink's own overhead, not Quickwit's speed."; }
