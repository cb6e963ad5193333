# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sourced by sink_bench.sh: its globals come from there, and it reads ours
# sink_bench.sh adapter: the HTTP sink (libpicomq_connector_http_sink) POSTing NDJSON bodies to
# nginx answering 204, against wrk posting the very same request bodies to the same endpoint at
# the same concurrency. Sourced by bench/sink_bench.sh; the interface is described in
# bench/sinks/postgres.sh and bench/README.md.
#
# The untimed reference run sends to nginx's /capture/, which keeps every request body as a file
# (sinkkit/testing/nginx.sh); wrk then replays those bodies (a Lua script cycling through them)
# over HTTP/1.1 keep-alive with as many connections as the sink keeps requests in flight, for
# BENCH_WRK_SECONDS. wrk always runs its full duration (thread:stop() does not end the run), so
# its figures are scaled to N records: records sent = requests x (N / bodies), and wall, CPU and
# nginx's CPU are multiplied by N / records sent. Both move the same bodies over the same
# connections; wrk does nothing else (no Kafka, no JSON, no commits).
# Verification: nginx's access log holds each request's status and Idempotency-Key
# (<topic>-<partition>-<first offset>-<last offset>); a picomq run must cover offsets 0..N-1
# with 204s; every wrk request must be answered 204.
#
# Knobs:
#   BENCH_HTTP_IN_FLIGHT=4        the sink's max_in_flight = wrk's connections
#   BENCH_HTTP_RECORDS=500        the sink's max_request_records
#   BENCH_HTTP_METADATA=true      the sink's include_metadata (the envelope)
#   BENCH_HTTP_IO_THREADS=1       the sink's io_threads
#   BENCH_WRK_SECONDS=8           how long wrk replays (under 60: wrk prints minutes beyond)

SINK_PLUGIN=libpicomq_connector_http_sink
HTTP_IN_FLIGHT="${BENCH_HTTP_IN_FLIGHT:-4}"
HTTP_RECORDS="${BENCH_HTTP_RECORDS:-500}"
HTTP_METADATA="${BENCH_HTTP_METADATA:-true}"
WRK_SECONDS="${BENCH_WRK_SECONDS:-8}"
HTTP_IO_THREADS="${BENCH_HTTP_IO_THREADS:-1}"
bench_require_positive BENCH_WRK_SECONDS "$WRK_SECONDS"
bench_require_positive BENCH_HTTP_IN_FLIGHT "$HTTP_IN_FLIGHT"
bench_require_positive BENCH_HTTP_RECORDS "$HTTP_RECORDS"
SINK_DESCRIPTION="http sink: NDJSON bodies of up to $HTTP_RECORDS records (include_metadata = $HTTP_METADATA), $HTTP_IN_FLIGHT requests in flight, to nginx answering 204"
SINK_TARGET="wrk:0.8"
SINK_BASELINES=("wrk|http_baseline_wrk")
nginx_dir=""
nginx_port=""
http_capture=0

sink_check() {
  command -v wrk >/dev/null || { echo "wrk is missing: run scripts/setup.sh" >&2; exit 2; }
  [[ -x /usr/sbin/nginx ]] || { echo "nginx is missing: run scripts/setup.sh" >&2; exit 2; }
}

sink_server_start() {
  nginx_dir="$work/nginx"
  nginx_port="$(bash "$repo/sinkkit/testing/nginx.sh" start "$nginx_dir" --owner $$)"
  bench_cleanup_hooks+=("bash $repo/sinkkit/testing/nginx.sh stop $nginx_dir")
  bench_server_pid="$(cat "$nginx_dir/nginx.pid")"
  log "nginx on 127.0.0.1:$nginx_port (pid $bench_server_pid)"
}

sink_plugin_config() {  # VARIANT RUN DIR
  local path=/ingest
  ((http_capture)) && path=/capture/ingest
  printf 'url = "http://127.0.0.1:%s%s"\nmax_in_flight = %s\nmax_request_records = %s\ninclude_metadata = %s\nio_threads = %s\n' \
    "$nginx_port" "$path" "$HTTP_IN_FLIGHT" "$HTTP_RECORDS" "$HTTP_METADATA" "$HTTP_IO_THREADS"
}

sink_prepare() {  # KIND LABEL RUN
  http_capture=0
  [[ "$1" == reference ]] && http_capture=1
  : > "$nginx_dir/access.log"   # nginx appends (O_APPEND): truncating in place is safe
}

sink_verify() {  # KIND LABEL RUN
  python3 - "$nginx_dir/access.log" "$1" "$N" "${bodies_count:-0}" <<'PY'
import sys
log, kind, n, bodies = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lines = [l.split() for l in open(log) if l.startswith("POST ")]
statuses = {}
for l in lines:
    statuses[l[2]] = statuses.get(l[2], 0) + 1
ingest = [l for l in lines if not l[1].startswith("/captured")]
bad = [l for l in ingest if l[2] != "204"]
if bad:
    sys.exit(f"{len(bad)} requests not answered 204: {bad[:3]}")
if kind == "baseline":
    print(f"requests={len(ingest)}")
    sys.exit(0)
covered = [0] * n
for l in ingest:
    key = l[4]
    first, last = (int(x) for x in key.rsplit("-", 2)[1:])
    for o in range(first, last + 1):
        covered[o] += 1
missing = [o for o, c in enumerate(covered) if c == 0]
if missing:
    sys.exit(f"offsets never sent: {len(missing)} (first {missing[:5]})")
# A resend (a reset connection) may repeat a request: allowed, and counted.
print(f"requests={len(ingest)} resent_records={sum(c - 1 for c in covered)}")
PY
}

# The reference run's bodies, for wrk: nginx kept one file per request; they are bundled into
# one file per connection ("<length>\n<bytes>" each), so wrk's start reads 4 files, not N: its
# start-up is outside its timed run but inside its CPU time, and opening a file per body
# counted seconds of CPU against wrk.
sink_reference_loaded() {
  local bodies="$work/bodies"
  rm -rf "$bodies"
  mkdir -p "$bodies"
  find "$nginx_dir/tmp/body" -type f -exec mv -t "$bodies" {} +
  bodies_count="$(find "$bodies" -type f | wc -l)"
  ((bodies_count > 0)) || { echo "nginx kept no request bodies" >&2; exit 1; }
  python3 - "$bodies" "$work/wrk-bundle" "$HTTP_IN_FLIGHT" <<'PY'
import os, sys
bodies, prefix, connections = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = sorted(os.listdir(bodies))
outs = [open(f"{prefix}.{c}", "wb") for c in range(connections)]
for i, name in enumerate(names):
    with open(os.path.join(bodies, name), "rb") as f:
        body = f.read()
    out = outs[i % connections]
    out.write(b"%d\n" % len(body))
    out.write(body)
for out in outs:
    out.close()
PY
  cat > "$work/wrk-bodies.lua" <<LUA
-- Replays the request bodies the sink sent, each connection (thread) its share in turn, from a
-- bundle of "<length>\\n<bytes>" entries.
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  threads[#threads + 1] = thread
end
function init(args)
  bodies = {}
  local f = assert(io.open("$work/wrk-bundle." .. id, "rb"))
  local data = f:read("*a")
  f:close()
  local at = 1
  while at <= #data do
    local eol = data:find("\\n", at, true)
    local n = tonumber(data:sub(at, eol - 1))
    bodies[#bodies + 1] = data:sub(eol + 1, eol + n)
    at = eol + n + 1
  end
  if #bodies == 0 then bodies[1] = "" end  -- more connections than bodies
  next_body = 0
end
function request()
  next_body = next_body % #bodies + 1
  return wrk.format("POST", "/ingest", {["Content-Type"] = "application/x-ndjson"}, bodies[next_body])
end
LUA
  log "wrk will replay $bodies_count request bodies ($(du -sh "$bodies" | cut -f1))"
}

http_baseline_wrk() {  # RUN
  # One thread per connection, the sink's concurrency.
  bench_timed "$work/wrk.out" wrk -- wrk -t "$HTTP_IN_FLIGHT" -c "$HTTP_IN_FLIGHT" -d "${WRK_SECONDS}s" \
    -s "$work/wrk-bodies.lua" "http://127.0.0.1:$nginx_port/ingest"
  # "  54860 requests in 8.10s, 5.76MB read": scale every figure to N records.
  timed_result="$(python3 - "$work/wrk.out" "$N" "$bodies_count" "$timed_result" <<'PY'
import re, sys
out, n, bodies, result = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
m = re.search(r"(\d+) requests in ([\d.]+)s,", out)
if not m:
    sys.exit("cannot read wrk's output: " + out)
requests, seconds = int(m.group(1)), float(m.group(2))
factor = n / (requests * n / bodies)  # N records / records sent
fields = dict(kv.split("=", 1) for kv in result.split())
fields["wall_s"] = f"{seconds * factor:.4f}"
for k in ("user_s", "sys_s", "server_cpu_s"):
    if k in fields:
        fields[k] = f"{float(fields[k]) * factor:.4f}"
fields["wrk_requests"] = str(requests)
fields["wrk_seconds"] = f"{seconds:.2f}"
print(" ".join(f"{k}={v}" for k, v in fields.items()))
PY
)" || { echo "wrk: $timed_result" >&2; exit 1; }
}

sink_notes() {
  printf '%s\n' "wrk: the reference run's $bodies_count request bodies, replayed for ${WRK_SECONDS} s by wrk -t $HTTP_IN_FLIGHT -c $HTTP_IN_FLIGHT (HTTP/1.1 keep-alive), scaled to N records; picomq: the http sink from Kafka, max_in_flight $HTTP_IN_FLIGHT, commits after the requests"
}
