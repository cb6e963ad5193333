#!/usr/bin/env bash
# Peer system for the InfluxDB sink benchmark: Telegraf 1.37.2 (bench/peers/build-telegraf.sh)
# with inputs.kafka_consumer and outputs.influxdb_v2, writing TOPIC into BUCKET of an InfluxDB 2.x
# server with the mapping the picomq adapter uses (measurement orders, tags status / channel / ccy,
# time from ts in ms, the other fields flattened with _: Telegraf's json parser, with the string
# fields named, since it keeps numbers and booleans only otherwise).
#
#   telegraf_influxdb.sh BOOTSTRAP TOPIC N INFLUX_URL ORG BUCKET TOKEN WORKDIR
#
# Prints ONE line of JSON on stdout, the fields of the other peers:
#   {"system":"telegraf","records":N,"wall_s":..,"startup_s":..,"cpu_s":..,"rss_kb":..[,"server_cpu_s":..]}
# wall_s: launch -> N points counted in the bucket; startup_s: launch -> the first point; cpu_s:
# Telegraf's utime+stime; rss_kb: its VmHWM. Points are counted every TG_POLL_MS (300) ms with a
# Flux count of the qty field (every order has one).
# Knobs: TG_BATCH (5000: metric_batch_size, the lines of one write), TG_TIMEOUT_S (600),
#   TG_POLL_MS, TG_SERVER_PID (the server's pid: also report server_cpu_s).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if (($# != 8)); then echo "usage: $0 BOOTSTRAP TOPIC N INFLUX_URL ORG BUCKET TOKEN WORKDIR" >&2; exit 2; fi
bootstrap="$1"; topic="$2"; n="$3"; url="$4"; org="$5"; bucket="$6"; token="$7"; work="$8"
batch="${TG_BATCH:-5000}"; timeout_s="${TG_TIMEOUT_S:-600}"; poll_ms="${TG_POLL_MS:-300}"
bin="$(bash "$repo/bench/peers/build-telegraf.sh")"
mkdir -p "$work"
group="telegraf-bench-$(date +%s%N)"
cat >"$work/telegraf.conf" <<CONF
[agent]
  interval = "1s"
  flush_interval = "100ms"
  flush_jitter = "0s"
  metric_batch_size = $batch
  metric_buffer_limit = 2000000
  omit_hostname = true
  quiet = true
[[inputs.kafka_consumer]]
  brokers = ["$bootstrap"]
  topics = ["$topic"]
  consumer_group = "$group"
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
[[outputs.influxdb_v2]]
  urls = ["$url"]
  token = "$token"
  organization = "$org"
  bucket = "$bucket"
  content_encoding = "identity"
CONF
count_points() {
  curl -sS -X POST "$url/api/v2/query?org=$org" -H "Authorization: Token $token" -H 'Content-Type: application/vnd.flux' \
    -H 'Accept: application/csv' --data-binary \
    "from(bucket: \"$bucket\") |> range(start: 0) |> filter(fn: (r) => r._measurement == \"orders\" and r._field == \"qty\") |> group() |> count()" |
    python3 -c 'import csv,sys; print(sum(int(r["_value"]) for r in csv.DictReader(sys.stdin) if r.get("_value")))' 2>/dev/null || echo 0
}
server_cpu() {  # utime+stime (s) of the server's process tree
  [[ -n "${TG_SERVER_PID:-}" ]] || { echo nan; return; }
  python3 - "$TG_SERVER_PID" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK"); total = 0
def walk(pid):
    global total
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(f[11]) + int(f[12])
        for t in os.listdir(f"/proc/{pid}/task"):
            for c in open(f"/proc/{pid}/task/{t}/children").read().split(): walk(int(c))
    except OSError: pass
walk(int(sys.argv[1])); print(total / hz)
PY
}
srv0="$(server_cpu)"
start="$(date +%s.%N)"
"$bin" --config "$work/telegraf.conf" >"$work/telegraf.log" 2>&1 &
pid=$!
first=""
got=0
while :; do
  got="$(count_points)"
  now="$(date +%s.%N)"
  [[ -z "$first" && "$got" -gt 0 ]] && first="$now"
  ((got >= n)) && break
  kill -0 "$pid" 2>/dev/null || { echo "telegraf exited early; see $work/telegraf.log" >&2; exit 1; }
  if (($(python3 -c "print(int($now - $start > $timeout_s))"))); then echo "telegraf: $got of $n points after ${timeout_s}s" >&2; kill "$pid"; exit 1; fi
  sleep "$(python3 -c "print($poll_ms / 1000)")"
done
end="$(date +%s.%N)"
srv1="$(server_cpu)"
read -r cpu rss < <(python3 - "$pid" <<'PY'
import os, sys
pid = sys.argv[1]; hz = os.sysconf("SC_CLK_TCK")
f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
rss = [l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM:")][0]
print((int(f[11]) + int(f[12])) / hz, rss)
PY
)
kill "$pid"; wait "$pid" 2>/dev/null || true
python3 - "$n" "$start" "$end" "${first:-$end}" "$cpu" "$rss" "$srv0" "$srv1" <<'PY'
import json, sys
n, start, end, first, cpu, rss, s0, s1 = sys.argv[1:]
out = {"system": "telegraf", "records": int(n), "wall_s": round(float(end) - float(start), 3),
       "startup_s": round(float(first) - float(start), 3), "cpu_s": float(cpu), "rss_kb": int(rss)}
if s0 != "nan": out["server_cpu_s"] = round(float(s1) - float(s0), 2)
print(json.dumps(out))
PY
