# shellcheck shell=bash
# Shared steps of the Kafka benchmarks (stdout_vs_kcat.sh, planes.sh, sink_bench.sh, memory.sh);
# source it, do not run it.
# Each step exits the script (status 1 or 2, message on stderr) when it fails, as the scripts did.
#
# Globals it sets, in the order the steps run:
#   repo, bench                  (on source) the repository and its bench/ dir
#   work, broker_dir             bench_init_workdir
#   bin, plugins                 bench_build
#   helper                       bench_compile_helper
#   port, bootstrap, broker_pid  bench_start_kafka
#   jmx_port                     bench_broker_jmx (before bench_start_kafka)
#   rdkafka_performance          bench_require_rdkafka_performance
#   records_file, payload_bytes  bench_produce_records
#   sink_result                  bench_run_sink
#   timed_result                 bench_timed
#
# Optional globals the caller may set (sink_bench.sh and its adapters do; the defaults keep the
# older scripts' behaviour):
#   bench_shape=orders           record shape for gen_records.py (--shape)
#   bench_sink_stdout=/dev/null  where bench_run_sink sends the runtime's stdout
#   bench_topics_extra=          more lines for the [[topics]] block of bench_write_sink_definition
#   bench_server_pid=            a destination server's root pid: bench_run_sink and bench_timed
#                                then also report server_cpu_s (CPU of its process tree)
#   bench_cleanup_hooks=()       commands the exit trap runs before it stops the broker

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The servers the benchmarks' recorded figures were measured against (bench/HISTORY.md): Kafka 4.1,
# PostgreSQL 15, OpenSearch 2.19, Elasticsearch 7.10, unless the caller chooses (the tests default
# to the newest: scripts/matrix.sh, docs/matrix.md).
export PICOMQ_KAFKA_VERSION="${PICOMQ_KAFKA_VERSION:-4.1}" PICOMQ_PG_VERSION="${PICOMQ_PG_VERSION:-15}"
export PICOMQ_OPENSEARCH_VERSION="${PICOMQ_OPENSEARCH_VERSION:-2.19}" PICOMQ_ELASTICSEARCH_VERSION="${PICOMQ_ELASTICSEARCH_VERSION:-7.10}"
bench="$repo/bench"

log() { printf '[bench %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# bench_require_positive NAME VALUE: exits 2 unless VALUE is a positive integer.
bench_require_positive() {
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "$1 must be a positive integer" >&2; exit 2; }
}

# bench_init_workdir PREFIX KEEP: creates the work dir ($BENCH_DIR, or a new /tmp/PREFIX.XXXXXX)
# and installs the exit trap, which stops the broker and removes the work dir unless KEEP is 1
# or the script failed.
bench_init_workdir() {
  local prefix="$1"
  bench_keep_workdir="$2"
  work="${BENCH_DIR:-$(mktemp -d "/tmp/$prefix.XXXXXX")}"
  mkdir -p "$work"
  broker_dir="$work/kafka"
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_cleanup_hooks=()

bench_cleanup() {
  local rc=$? hook
  for hook in "${bench_cleanup_hooks[@]}"; do eval "$hook" >/dev/null 2>&1 || true; done
  "$repo/tests/servers/kafka.sh" stop "$broker_dir" >/dev/null 2>&1 || true
  if [[ "$bench_keep_workdir" == 1 || $rc -ne 0 ]]; then
    log "work dir kept: $work"
  else
    rm -rf "$work"
  fi
  exit $rc
}

# bench_build SKIP_BUILD: runs scripts/setup.sh + scripts/build.sh unless SKIP_BUILD is 1.
# Sets bin and plugins; the caller checks that what it needs is there. BENCH_PICOMQ_BUILD names
# another build dir whose bin/picomq-connect and plugins/ run instead (an older commit's, built
# alone, to compare two builds against the same baseline; with BENCH_SKIP_BUILD=1).
bench_build() {
  if [[ "$1" != 1 ]]; then
    log "setup + build"
    bash "$repo/scripts/setup.sh" >&2
    bash "$repo/scripts/build.sh" >&2
  fi
  local build="${BENCH_PICOMQ_BUILD:-$repo/build}"
  bin="$build/bin/picomq-connect"
  plugins="$build/plugins"
}

# bench_require_rdkafka_performance: librdkafka's own benchmark client of the runtime's librdkafka,
# built once per machine (scripts/build-librdkafka.sh --performance-tool); sets rdkafka_performance.
bench_require_rdkafka_performance() {
  rdkafka_performance="${PICOMQ_DEPS_CACHE:-$HOME/.cache/picomq}/bench-tools/rdkafka_performance-2.12.1"
  [[ -x "$rdkafka_performance" ]] || bash "$repo/scripts/build-librdkafka.sh" --performance-tool "$rdkafka_performance" >&2
}

# bench_broker_jmx: the broker bench_start_kafka starts next opens a JMX port on loopback, for
# bench_broker_requests.
bench_broker_jmx() {
  jmx_port="$(bench_free_port)"
  export PICOMQ_KAFKA_JAVA_OPTS="-Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.port=$jmx_port \
-Dcom.sun.management.jmxremote.rmi.port=$jmx_port -Dcom.sun.management.jmxremote.host=127.0.0.1 \
-Djava.rmi.server.hostname=127.0.0.1 -Dcom.sun.management.jmxremote.authenticate=false \
-Dcom.sun.management.jmxremote.ssl=false"
}

# bench_broker_requests: the requests the broker has served so far, by API, from its JMX
# (kafka.network RequestMetrics): one "Fetch=123 OffsetCommit=4 ..." line, APIs never asked left out.
bench_broker_requests() {
  java -Xshare:auto -XX:TieredStopAtLevel=1 -cp "$(cat "$broker_dir/libs")/*" org.apache.kafka.tools.JmxTool \
    --jmx-url "service:jmx:rmi:///jndi/rmi://127.0.0.1:$jmx_port/jmxrmi" --one-time true --report-format properties \
    --object-name 'kafka.network:type=RequestMetrics,name=RequestsPerSec,*' --attributes Count 2>/dev/null |
    python3 -c '
import re, sys
counts = {}  # by API, summed over its versions (Kafka 4 tags each version apart)
for line in sys.stdin:
    m = re.search(r"request=([A-Za-z]+)(,version=[0-9]+)?:Count=([0-9]+)", line)
    if m:
        counts[m.group(1)] = counts.get(m.group(1), 0) + int(m.group(3))
print(" ".join(f"{k}={v}" for k, v in sorted(counts.items()) if v))'
}

# bench_requests_between BEFORE AFTER: the requests served between two bench_broker_requests
# lines, as result fields: req_fetch, req_commit (OffsetCommit), req_heartbeat (Heartbeat and
# KIP-848's ConsumerGroupHeartbeat), req_other (the other clients' APIs but OffsetFetch, which the
# measuring helper itself sends every 10 ms while it waits for a sink's commits; not FetchConsumer,
# which counts the consumers' Fetch requests again; not the KRaft
# controller's own BrokerHeartbeat and quorum traffic).
bench_requests_between() {
  python3 - "$1" "$2" <<'PY'
import sys
def parse(s): return {k: int(v) for k, v in (kv.split("=") for kv in s.split())}
a, b = parse(sys.argv[1]), parse(sys.argv[2])
d = {k: b[k] - a.get(k, 0) for k in b}
fetch, commit = d.pop("Fetch", 0), d.pop("OffsetCommit", 0)
heartbeat = d.pop("Heartbeat", 0) + d.pop("ConsumerGroupHeartbeat", 0)
for k in ("OffsetFetch", "FetchConsumer", "FetchFollower", "BrokerHeartbeat", "BrokerRegistration", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch",
          "DescribeQuorum", "FetchSnapshot", "AlterPartition", "UpdateRaftVoter", "AddRaftVoter", "RemoveRaftVoter"):
    d.pop(k, 0)
print(f"req_fetch={fetch} req_commit={commit} req_heartbeat={heartbeat} req_other={sum(d.values())}")
PY
}

bench_require_kcat() {
  command -v kcat >/dev/null || { echo "kcat not installed (bash scripts/setup.sh)" >&2; exit 2; }
}

# bench_compile_helper: the build's bench_helper (bench/bench_helper.c on the runtime's librdkafka).
bench_compile_helper() {
  helper="$repo/build/bench/plugins/bench_helper"
  [[ -x "$helper" ]] || cmake --build "$repo/build" --target bench_helper >/dev/null
}

# Prints a port p with p and p+1 free (broker + controller), below the ephemeral range so no
# client's outgoing connection can take the controller port before it binds.
bench_free_port_pair() {
  python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close(); continue
    try:
        t = socket.socket(); t.bind(("127.0.0.1", p + 1)); t.close(); s.close(); print(p); break
    except OSError:
        s.close()
PY
}

# bench_free_port: prints a free loopback port below the ephemeral range (32768-60999), apart
# from the port pairs above (20000-31999) and SeaweedFS's (2000-9999, gRPC 12000-19999).
bench_free_port() {
  python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randrange(10000, 12000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        s.close()
PY
}

# bench_start_kafka: starts a fresh single-node broker in $broker_dir (the exit trap stops it).
bench_start_kafka() {
  port="$(bench_free_port_pair)"
  [[ -n "$port" ]] || { echo "no free port pair found" >&2; exit 1; }
  bootstrap="127.0.0.1:$port"
  log "starting Kafka on $bootstrap (dir $broker_dir)"
  "$repo/tests/servers/kafka.sh" start "$broker_dir" "$port" >&2
  broker_pid="$(cat "$broker_dir/broker.pid")"
}

# bench_create_topic TOPIC PARTITIONS: creates the topic with Kafka's TopicCommand.
bench_create_topic() {
  local topic="$1" partitions="$2" plural=s
  ((partitions == 1)) && plural=
  log "creating topic $topic ($partitions partition$plural)"
  java -Xshare:auto -XX:TieredStopAtLevel=1 -cp "$repo/tools/kafka/libs/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$bootstrap" --create --topic "$topic" --partitions "$partitions" --replication-factor 1 \
    > "$work/topic.log" 2>&1 || { cat "$work/topic.log" >&2; exit 1; }
}

# bench_produce_records TOPIC N [--log-duration]: generates N records (gen_records.py) into
# $records_file, produces them into partition 0 of TOPIC with kcat and exits 1 unless the end
# offset is then N. Sets payload_bytes (the records without their '\n'). The caller removes
# $records_file when done with it. --log-duration logs the production time and end offset.
bench_produce_records() {
  local topic="$1" n="$2" log_duration="${3:-}" t0 t1 end_offset
  records_file="$work/records.jsonl"
  local shape_args=()
  [[ "${bench_shape:-orders}" != orders ]] && shape_args=(--shape "$bench_shape")
  log "generating $n records${shape_args[*]:+ (shape ${bench_shape})}"
  python3 "$bench/gen_records.py" "$n" "$records_file" ${shape_args[@]+"${shape_args[@]}"} >&2
  payload_bytes=$(($(stat -c %s "$records_file") - n))   # one '\n' per record is not payload

  log "producing into $topic"
  t0=$(date +%s.%N)
  kcat -P -b "$bootstrap" -t "$topic" -l -z none \
    -X linger.ms=20 -X batch.num.messages=10000 -X queue.buffering.max.messages=500000 "$records_file"
  t1=$(date +%s.%N)
  end_offset="$("$helper" endoffset "$bootstrap" "$topic" 0)"
  if [[ "$log_duration" == --log-duration ]]; then
    log "produced in $(python3 -c "print(f'{$t1-$t0:.1f}')") s; end offset $end_offset"
  fi
  [[ "$end_offset" == "$n" ]] || { echo "end offset $end_offset != $n records" >&2; exit 1; }
}

# bench_write_sink_configs DIR PLUGIN GROUP TOPIC BATCH_LENGTH PLUGIN_CONFIG: writes
# DIR/runtime.toml and DIR/sinks.d/bench.toml, a sink "bench" of plugin PLUGIN reading TOPIC as
# JSON in consumer group GROUP; PLUGIN_CONFIG is the body of its [plugin_config] table.
bench_write_sink_configs() {
  local dir="$1" plugin="$2" group="$3" topic="$4" batch_length="$5" plugin_config="$6"
  bench_write_runtime_config "$dir"
  bench_write_sink_definition "$dir/sinks.d/bench.toml" bench "$plugin" "$group" "$topic" "$batch_length" "$plugin_config"
}

# bench_write_runtime_config DIR: DIR/runtime.toml (the broker, the build's plugins, DIR/sinks.d,
# DIR/status.json; plus the adapter's SINK_RUNTIME_SETTINGS lines in [runtime], e.g. larger
# buffers for a sink that keeps many batches pending).
bench_write_runtime_config() {
  local dir="$1"
  mkdir -p "$dir/sinks.d"
  cat > "$dir/runtime.toml" <<TOML
[broker]
bootstrap_servers = "$bootstrap"
${BENCH_CLIENT_PROPERTIES:+properties = { $BENCH_CLIENT_PROPERTIES \}}
[plugins]
path = ["$plugins"]
[sinks]
dir = "sinks.d"
[runtime]
status_file = "$dir/status.json"
log_level = "${BENCH_LOG_LEVEL:-info}"
${SINK_RUNTIME_SETTINGS:-}
TOML
}

# bench_write_sink_definition FILE KEY PLUGIN GROUP TOPIC BATCH_LENGTH PLUGIN_CONFIG
bench_write_sink_definition() {
  local file="$1" key="$2" plugin="$3" group="$4" topic="$5" batch_length="$6" plugin_config="$7"
  cat > "$file" <<TOML
type = "sink"
key = "$key"
path = "$plugin"
[[topics]]
topics = ["$topic"]
schema = "${BENCH_SCHEMA:-json}"
batch_length = $batch_length
poll_interval = "100ms"
consumer_group = "$group"
${bench_topics_extra:-}
[plugin_config]
$plugin_config
TOML
}

# bench_tree_cpu PID: CPU seconds (user + system) PID and its descendants have used so far.
bench_tree_cpu() {
  local pids=("$1") i=0 total=0 p
  while ((i < ${#pids[@]})); do
    mapfile -t -O "${#pids[@]}" pids < <(pgrep -P "${pids[i]}" || true)
    i=$((i + 1))
  done
  for p in "${pids[@]}"; do
    # fields 14 and 15 of /proc/PID/stat (after the command's ')' : 12 and 13): utime, stime in ticks
    total=$((total + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}

# bench_broker_mark / bench_broker_since: the broker's CPU over a run, net of what it spends idle
# (its JVM and controller use ~0.02-0.05 CPU-s a second with no client; a peer's run lasts until
# its script sees the last row, much longer than the records take). bench_broker_mark samples the
# idle rate over 2 s, then marks the start; bench_broker_since prints " broker_cpu_s=<net>
# broker_idle_cpu_s=<the idle share taken out>".
bench_broker_mark() {
  local c0
  c0="$(bench_tree_cpu "$broker_pid")"
  sleep 2
  broker_mark_cpu="$(bench_tree_cpu "$broker_pid")"
  broker_idle_rate="$(awk -v a="$c0" -v b="$broker_mark_cpu" 'BEGIN { printf "%.4f", (b - a) / 2 }')"
  broker_mark_time="$(date +%s.%N)"
}
bench_broker_since() {
  awk -v a="$broker_mark_cpu" -v b="$(bench_tree_cpu "$broker_pid")" -v rate="$broker_idle_rate" \
      -v t0="$broker_mark_time" -v t1="$(date +%s.%N)" \
      'BEGIN { idle = rate * (t1 - t0); net = b - a - idle; if (net < 0) net = 0;
               printf " broker_cpu_s=%.2f broker_idle_cpu_s=%.2f", net, idle }'
}

# bench_run_sink DIR GROUP TOPIC N LABEL RUN: runs picomq-connect on DIR/runtime.toml under
# `bench_helper sink` until GROUP has committed N records of TOPIC[0], then stops it; exits 1
# (with LABEL, RUN and the runtime's last log lines) unless that worked. Sets sink_result to the
# helper's measurements plus pauses=<back-pressure pauses in the runtime's log>. The runtime's
# stdout goes to $bench_sink_stdout (default /dev/null); with $bench_server_pid set, sink_result
# also has server_cpu_s.
bench_run_sink() {
  local dir="$1" group="$2" topic="$3" n="$4" label="$5" run="$6"
  local timeout=$((120 + n / 5000)) server_opt=()
  [[ -n "${bench_server_pid:-}" ]] && server_opt=(--server "$bench_server_pid")
  # The broker's CPU, unless it is already the server measured (stdout_vs_kcat.sh).
  local broker=""
  [[ -n "${broker_pid:-}" && "${bench_server_pid:-}" != "$broker_pid" ]] && { broker=1; bench_broker_mark; }
  sink_result="$("$helper" sink "$bootstrap" "$group" "$topic" 0 "$n" "$dir/status.json" "${bench_sink_stdout:-/dev/null}" \
                 "$timeout" ${server_opt[@]+"${server_opt[@]}"} -- \
                 ${BENCH_WRAP:-} "$bin" --config "$dir/runtime.toml" 2> "$dir/stderr.log")" || true
  [[ "$sink_result" == *" exit=0"* && "$sink_result" != "wall_s=-1"* ]] ||
    { echo "$label run $run failed: $sink_result" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
  sink_result+=" pauses=$(grep -c 'pausing the consumer' "$dir/stderr.log" || true)"
  [[ -n "$broker" ]] && sink_result+="$(bench_broker_since)"
  return 0
}

# bench_peer LABEL DIR -- CMD [ARGS...]: runs a peer script of bench/peers/ (its one JSON line into
# DIR/peer.json) under bench_timed, with PEER_SERVER_PID = the destination server, and sets
# peer_result for sink_bench.sh. What the peer measured of itself (bench/peers/peer_lib.sh: its
# process tree from launch until the destination held N, start-up, the CPU after the first record,
# the server's CPU over that time) wins over bench_timed's outer measure, which also holds the
# script's own polling; a field the peer does not report comes from the outer measure.
bench_peer() {
  local label="$1" dir="$2" broker_field=""
  shift 3
  mkdir -p "$dir"
  [[ -n "${broker_pid:-}" ]] && bench_broker_mark
  PEER_SERVER_PID="${bench_server_pid:-}" bench_timed "$dir/peer.json" "$label" -- "$@"
  [[ -n "${broker_pid:-}" ]] && broker_field="$(bench_broker_since)"
  cp "$work/timed.stderr" "$dir/peer.stderr"
  peer_result="$(python3 - "$dir/peer.json" "$timed_result" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip().startswith("{")]
j = json.loads(lines[-1])
outer = dict(kv.split("=", 1) for kv in sys.argv[2].split())
own = "cpu_s" in j
fields = {
    "wall_s": j.get("wall_s", outer["wall_s"]),
    "join_s": j["startup_s"],  # launch -> the first record at the destination: the peer's start-up
    "user_s": j["cpu_s"] if own else outer["user_s"],
    "sys_s": 0 if own else outer["sys_s"],
    "hwm_kb": j["rss_kb"] if own else outer["maxrss_kb"],
    "server_cpu_s": j.get("server_cpu_s", outer.get("server_cpu_s", "nan")),
    "outer_wall_s": outer["wall_s"],
    "peer_records": j["records"],
}
if "load_cpu_s" in j:
    fields["load_cpu_s"] = j["load_cpu_s"]
print(" ".join(f"{k}={v}" for k, v in fields.items()))
PY
)" || { echo "$label: no result line in $dir/peer.json (stderr: $dir/peer.stderr)" >&2; exit 1; }
  peer_result+="$broker_field"
}

# bench_timed STDOUT_FILE LABEL -- CMD [ARGS...]: runs CMD under `bench_helper run` (stdout to
# STDOUT_FILE, stderr to $work/timed.stderr) and exits 1 (with LABEL and CMD's stderr) unless it
# exits 0. Sets timed_result to "wall_s=.. user_s=.. sys_s=.. maxrss_kb=.. exit=0", plus
# server_cpu_s with $bench_server_pid set. Wall is fork to exit; CPU and RSS are CMD's (wait4).
bench_timed() {
  local out="$1" label="$2" server_opt=()
  shift 3
  [[ -n "${bench_server_pid:-}" ]] && server_opt=(--server "$bench_server_pid")
  timed_result="$("$helper" run "$out" ${server_opt[@]+"${server_opt[@]}"} -- "$@" 2> "$work/timed.stderr")" || true
  [[ "$timed_result" == *" exit=0"* ]] ||
    { echo "$label failed: $timed_result" >&2; tail -20 "$work/timed.stderr" >&2; exit 1; }
}
