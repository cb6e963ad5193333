# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the Doris sink into its contract server (sinks/doris/tests/doris_contract.py,
# Python, FE + BE; no Doris cluster runs here). No baseline: what it measures is the sink's own rate
# and CPU per record (Stream Loads of label_span offsets, the 307 hop each time) against a server
# that loads at once (its CPU is reported apart); it says nothing of a real Doris's load speed.
# Verification: the table holds N rows with N distinct offsets.
#
# Knobs: BENCH_DORIS_SPAN=10000 (label_span), BENCH_DORIS_2PC=false (two_phase_commit)

SINK_PLUGIN=libpicomq_connector_doris_sink
DORIS_SPAN="${BENCH_DORIS_SPAN:-10000}"
DORIS_2PC="${BENCH_DORIS_2PC:-false}"
SINK_DESCRIPTION="doris sink: Stream Load of JSON lines (flat), loads cut at label_span $DORIS_SPAN, two_phase_commit $DORIS_2PC, into the contract server"
SINK_TARGET=""
doris_port=""

sink_server_start() {
  local out="$work/doris.port"
  python3 "$repo/sinks/doris/tests/doris_contract.py" --password bench > "$out" 2> "$work/doris.log" &
  bench_server_pid=$!
  bench_cleanup_hooks+=("kill $bench_server_pid")
  for _ in $(seq 100); do [[ -s "$out" ]] && break; sleep 0.05; done
  doris_port="$(head -1 "$out")"
  log "Doris contract server (FE) on 127.0.0.1:$doris_port (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'url = "http://127.0.0.1:%s"\ndatabase = "bench"\ntable = "orders"\npassword = "bench"\nlabel_span = %s\ntwo_phase_commit = %s\n' \
    "$doris_port" "$DORIS_SPAN" "$DORIS_2PC"
}

sink_prepare() {
  curl -sf -XPOST "http://127.0.0.1:$doris_port/_control/reset" -d '{}' > /dev/null &&
    curl -sf -XPOST "http://127.0.0.1:$doris_port/_control/table" -d '{"db": "bench", "table": "orders", "columns": [
      {"name": "pico_partition", "type": "INT", "nullable": false}, {"name": "pico_offset", "type": "BIGINT", "nullable": false},
      {"name": "pico_timestamp", "type": "BIGINT"}, {"name": "customer", "type": "STRING"}, {"name": "total", "type": "DOUBLE"}]}' > /dev/null
}

sink_verify() {  # KIND LABEL RUN
  local counts
  counts="$(curl -sf "http://127.0.0.1:$doris_port/_control/rows?db=bench&table=orders" |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["rows"]; print(len(d), len({(x["pico_partition"], x["pico_offset"]) for x in d}))')"
  [[ "$counts" == "$N $N" ]] || { echo "$2 run $3: rows / distinct offsets $counts, expected $N" >&2; return 1; }
  echo "rows=$N"
}

sink_notes() { echo "Destination: the Doris contract server (Python FE + BE), loads applied at once: the sink's own overhead, not Doris's speed."; }
