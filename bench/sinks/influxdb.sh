# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the InfluxDB sink (libpicomq_connector_influxdb_sink) into a real
# InfluxDB 2.8.0 (sinks/influxdb/server.sh, the v2 API), side by side with curl posting the same
# line-protocol bodies, in the same batch sizes and at the same concurrency, into a fresh bucket.
# Sourced by bench/sink_bench.sh; the interface is described in bench/sinks/postgres.sh and
# bench/README.md.
#
# The mapping: measurement orders, tags status / channel / ccy (180 series), every other field of
# the order (nested objects and arrays flattened with _), time from the order's ts (epoch ms,
# unique per record), precision ms. The baseline's bodies are made from the produced records
# before the runs (untimed) with that same mapping by a short Python converter (the sink's line
# encoder is checked against the same rules by its unit tests; the verification below counts
# exactly N points after either), cut every BENCH_INFLUX_REQUEST_LINES lines, posted by one curl
# process with --parallel --parallel-max BENCH_INFLUX_IN_FLIGHT over kept-alive connections.
# Every run is checked: the bucket holds exactly N points (count of the qty field, which every
# order has).
#
# Knobs:
#   BENCH_INFLUX_IN_FLIGHT=4          the sink's max_in_flight and curl's --parallel-max
#   BENCH_INFLUX_REQUEST_LINES=5000   the sink's max_request_lines and the baseline's lines per body
#   BENCH_INFLUX_COMPRESSION=none     the sink's compression (none | gzip); the baseline sends plain bodies

SINK_PLUGIN=libpicomq_connector_influxdb_sink
INFLUX_IN_FLIGHT="${BENCH_INFLUX_IN_FLIGHT:-4}"
INFLUX_REQUEST_LINES="${BENCH_INFLUX_REQUEST_LINES:-5000}"
INFLUX_COMPRESSION="${BENCH_INFLUX_COMPRESSION:-none}"
INFLUX_BUCKET=bench
INFLUX_TOKEN=picomq-test-token
SINK_TARGET="curl-lp:0.8"
SINK_DESCRIPTION="influxdb sink, api v2, measurement orders, tags status/channel/ccy, other fields flattened, time from ts (ms): writes of up to $INFLUX_REQUEST_LINES lines, $INFLUX_IN_FLIGHT in flight, compression $INFLUX_COMPRESSION"
SINK_BASELINES=("curl-lp|influx_baseline_curl")
# Telegraf 1.37.2 (bench/peers/telegraf.sh influxdb, built once by bench/peers/build-telegraf.sh)
# with BENCH_PEER=1.
SINK_PEERS=("telegraf|influx_peer_telegraf")
bench_require_positive BENCH_INFLUX_IN_FLIGHT "$INFLUX_IN_FLIGHT"
bench_require_positive BENCH_INFLUX_REQUEST_LINES "$INFLUX_REQUEST_LINES"
influx_dir=""
influx_port=""

influx() {  # METHOD PATH [BODY]: prints the answer; exits 1 unless 2xx
  local out
  out="$(curl -sS --fail-with-body -X "$1" -H "Authorization: Token $INFLUX_TOKEN" -H 'Content-Type: application/json' \
    "http://127.0.0.1:$influx_port$2" ${3:+--data-binary "$3"})" || { echo "influxdb: $1 $2 failed: $out" >&2; exit 1; }
  printf '%s' "$out"
}

sink_check() {
  local cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
  [[ -x "$cache/influxdb-2.8.0/influxd" ]] || { echo "no InfluxDB 2.8.0 in $cache: run scripts/setup.sh" >&2; exit 2; }
  [[ "$INFLUX_COMPRESSION" =~ ^(none|gzip)$ ]] || { echo "BENCH_INFLUX_COMPRESSION must be none or gzip" >&2; exit 2; }
}

sink_server_start() {
  influx_dir="$work/influxdb"
  influx_port="$(bash "$repo/sinks/influxdb/server.sh" start "$influx_dir" 2 --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinks/influxdb/server.sh stop $influx_dir")
  bench_server_pid="$(cat "$influx_dir/influxd.pid")"
  influx_org_id="$(influx GET '/api/v2/orgs?org=picomq' | python3 -c 'import json,sys; print(json.load(sys.stdin)["orgs"][0]["id"])')"
  log "InfluxDB $(curl -sS -o /dev/null -D - "http://127.0.0.1:$influx_port/ping" | tr -d '\r' | sed -n 's/^X-Influxdb-Version: //Ip') on 127.0.0.1:$influx_port (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  printf 'url = "http://127.0.0.1:%s"\norg = "picomq"\nbucket = "%s"\ntoken = "%s"\nmeasurement = "orders"\ntags = ["status", "channel", "ccy"]\ntimestamp_field = "ts"\nprecision = "ms"\nmax_in_flight = %s\nmax_request_lines = %s\ncompression = "%s"\n' \
    "$influx_port" "$INFLUX_BUCKET" "$INFLUX_TOKEN" "$INFLUX_IN_FLIGHT" "$INFLUX_REQUEST_LINES" "$INFLUX_COMPRESSION"
}

sink_prepare() {  # KIND LABEL RUN: a fresh, empty bucket
  local id
  # The org's buckets, this one by name (2.8.0 answers 404 to ?name= of a bucket that does not exist).
  id="$(influx GET "/api/v2/buckets?orgID=$influx_org_id&limit=100" |
    python3 -c 'import json,sys; print(next((b["id"] for b in json.load(sys.stdin)["buckets"] if b["name"] == sys.argv[1]), ""))' "$INFLUX_BUCKET")"
  [[ -z "$id" ]] || influx DELETE "/api/v2/buckets/$id" >/dev/null
  influx POST /api/v2/buckets "{\"orgID\":\"$influx_org_id\",\"name\":\"$INFLUX_BUCKET\",\"retentionRules\":[]}" >/dev/null
}

sink_verify() {  # KIND LABEL RUN
  local got
  got="$(curl -sS --fail-with-body -X POST "http://127.0.0.1:$influx_port/api/v2/query?org=picomq" \
    -H "Authorization: Token $INFLUX_TOKEN" -H 'Content-Type: application/vnd.flux' -H 'Accept: application/csv' \
    --data-binary "from(bucket: \"$INFLUX_BUCKET\") |> range(start: 0) |> filter(fn: (r) => r._measurement == \"orders\" and r._field == \"qty\") |> group() |> count()" |
    python3 -c 'import csv,sys; rows=[r for r in csv.DictReader(sys.stdin) if r.get("_value")]; print(sum(int(r["_value"]) for r in rows))')"
  [[ "$got" == "$N" ]] || { echo "$2 run $3: bucket $INFLUX_BUCKET holds $got points, not $N" >&2; return 1; }
  echo "points=$got"
}

# While the produced records are still on disk: the baseline's bodies, by the sink's mapping. Not timed.
sink_records_produced() {
  influx_files="$work/influx-inputs"
  mkdir -p "$influx_files"
  python3 - "$records_file" "$INFLUX_REQUEST_LINES" "$influx_files" "http://127.0.0.1:$influx_port/api/v2/write?org=picomq&bucket=$INFLUX_BUCKET&precision=ms" "$INFLUX_TOKEN" <<'PY'
import json, sys
src, per_body, out, url, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def key(s): return s.replace(",", r"\,").replace("=", r"\=").replace(" ", r"\ ")
def value(v):
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, int): return f"{v}i"
    if isinstance(v, float): return repr(v)
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
def flatten(name, v, out):
    if isinstance(v, dict):
        for k, x in v.items(): flatten(f"{name}_{k}" if name else k, x, out)
    elif isinstance(v, list):
        for i, x in enumerate(v): flatten(f"{name}_{i}", x, out)
    elif v is not None: out.append((name, v))
tags = ("status", "channel", "ccy")
lines = []
with open(src) as f:
    for raw in f:
        o = json.loads(raw)
        t = ",".join(f"{key(k)}={key(str(o[k]))}" for k in sorted(tags) if k in o)
        fields = []
        flatten("", {k: v for k, v in o.items() if k not in tags and k != "ts"}, fields)
        lines.append("orders," + t + " " + ",".join(f"{key(k)}={value(v)}" for k, v in fields) + f" {o['ts']}\n")
with open(f"{out}/curl.cfg", "w") as cfg:
    for n, start in enumerate(range(0, len(lines), per_body)):
        with open(f"{out}/body.{n:06d}", "w") as b:
            b.writelines(lines[start:start + per_body])
        cfg.write(("next\n" if n else "") + f'url = "{url}"\ndata-binary = "@{out}/body.{n:06d}"\n'
                  f'header = "Authorization: Token {token}"\nheader = "Content-Type: text/plain; charset=utf-8"\n'
                  f'output = "/dev/null"\nfail\n')
PY
  log "baseline input: $(ls "$influx_files"/body.* | wc -l) line-protocol bodies, $(cat "$influx_files"/body.* | wc -c) bytes"
}

influx_baseline_curl() {
  bench_timed /dev/null curl-lp -- curl -sS --parallel --parallel-max "$INFLUX_IN_FLIGHT" -K "$influx_files/curl.cfg"
}

# Telegraf: same topic, a new consumer group, the same (emptied) bucket; one JSON line out.
influx_peer_telegraf() {
  TG_BATCH="$INFLUX_REQUEST_LINES" bench_peer telegraf "$work/peer-telegraf-r$1" -- \
    bash "$repo/bench/peers/telegraf.sh" influxdb "$bootstrap" "$TOPIC" "$N" "$work/peer-telegraf-r$1" \
    "http://127.0.0.1:$influx_port" picomq "$INFLUX_BUCKET" "$INFLUX_TOKEN"
}

sink_notes() {
  echo "InfluxDB 2.8.0 (sinks/influxdb/server.sh: one server, data in the work dir); a fresh bucket per run (no retention)"
  [[ "$PEER" == 1 ]] && echo "peer: Telegraf 1.37.2 (inputs.kafka_consumer, json parser with the same tags / time / string fields, outputs.influxdb_v2, metric_batch_size $INFLUX_REQUEST_LINES, flush_interval 100ms); its time: launch to N points counted (Flux count every 300 ms)"
  echo "baseline: one curl process posting the same line protocol ($INFLUX_REQUEST_LINES lines per body, made from the produced records by the sink's mapping) with --parallel-max $INFLUX_IN_FLIGHT"
}
