#!/usr/bin/env bash
# Benchmark: picomq-connect's resident memory (VmRSS) idle, during and after a load, on a real
# single-node Apache Kafka broker. See bench/README.md ("memory.sh"). Not a test: ctest does not
# run it.
#
# Per allocator variant: a runtime with 3 stdout sinks (output to /dev/null) on 3 fresh topics;
# RSS once the sinks are assigned and have settled (idle), then N records produced into each
# topic, then, once every record is committed and a settling period has passed, RSS again
# (after-load). Target: after-load <= 1.2 x idle. Also the idle RSS of a runtime with 3 more
# sinks (the cost of an idle sink). One JSON line per variant on stdout.
#
# Environment:
#   BENCH_RECORDS=10000     records produced into each of the topics (~205 B JSON each)
#   BENCH_SINKS=3           sinks (and topics) of the measured runtime
#   BENCH_EXTRA_SINKS=3     idle-only second runtime with this many more sinks (0: skip)
#   BENCH_IDLE_SETTLE_S=3   seconds between "all sinks assigned" and the idle sample
#   BENCH_SETTLE_S=5        seconds between the last commit and the after-load sample (RSS is
#                           also sampled every second in between: after_curve_mib)
#   BENCH_MALLOC_CONF=      extra variants, ';'-separated, each run with MALLOC_CONF=<it> (which
#                           overrides the built-in jemalloc options one by one), e.g. jemalloc's
#                           defaults: "background_thread:false,dirty_decay_ms:10000,muzzy_decay_ms:0"
#                           The built-in variant runs with MALLOC_CONF unset.
#   BENCH_TARGET=1.2        target ratio after-load / idle
#   BENCH_STRICT=0          1: exit 1 when the built-in variant misses the target
#   BENCH_SKIP_BUILD=0      1: skip scripts/setup.sh + scripts/build.sh (use the existing build/)
#   BENCH_KEEP=0            1: keep the work dir (broker log, configs, runtime logs, RSS samples)
#   BENCH_DIR=              work dir (default: a new mktemp -d under /tmp)
# CI smoke: BENCH_SKIP_BUILD=1 BENCH_RECORDS=2000 BENCH_SETTLE_S=3 BENCH_EXTRA_SINKS=0 bash bench/memory.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N="${BENCH_RECORDS:-10000}"
SINKS="${BENCH_SINKS:-3}"
EXTRA="${BENCH_EXTRA_SINKS:-3}"
IDLE_SETTLE="${BENCH_IDLE_SETTLE_S:-3}"
SETTLE="${BENCH_SETTLE_S:-5}"
TARGET="${BENCH_TARGET:-1.2}"
STRICT="${BENCH_STRICT:-0}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
KEEP="${BENCH_KEEP:-0}"
bench_require_positive BENCH_RECORDS "$N"
bench_require_positive BENCH_SINKS "$SINKS"
[[ "$EXTRA" =~ ^[0-9]+$ ]] || { echo "BENCH_EXTRA_SINKS must be a non-negative integer" >&2; exit 2; }
[[ "$IDLE_SETTLE" =~ ^[0-9]+$ && "$SETTLE" =~ ^[0-9]+$ ]] || { echo "BENCH_IDLE_SETTLE_S and BENCH_SETTLE_S must be whole seconds" >&2; exit 2; }
variants=("")   # "" = the built-in options (MALLOC_CONF unset)
if [[ -n "${BENCH_MALLOC_CONF:-}" ]]; then
  IFS=';' read -r -a extra_confs <<< "$BENCH_MALLOC_CONF"
  for c in "${extra_confs[@]}"; do [[ -n "$c" ]] && variants+=("$c"); done
fi

bench_init_workdir picomq-memory "$KEEP"
runtime_pids=()
bench_cleanup_hooks+=('for p in "${runtime_pids[@]}"; do kill -KILL "$p"; done')

# ------------------------------------------------------------------ build
bench_build "$SKIP_BUILD"
[[ -x "$bin" && -f "$plugins/libpicomq_connector_stdout_sink.so" ]] || { echo "no build in $repo/build (run without BENCH_SKIP_BUILD)" >&2; exit 2; }
bench_require_kcat
bench_compile_helper

# effective_conf CONF: the jemalloc options the runtime runs with under MALLOC_CONF=CONF ("" =
# unset), as jemalloc itself prints them at exit (stats_print); "no jemalloc" without it.
effective_conf() {
  local conf="$1" opts
  opts="$(env -u MALLOC_CONF MALLOC_CONF="${conf:+$conf,}stats_print:true" "$bin" --help 2>&1 >/dev/null |
          sed -n 's/^  opt\.\(background_thread\|dirty_decay_ms\|muzzy_decay_ms\): \([^ ]*\).*/\1:\2/p' | paste -sd, -)"
  echo "${opts:-no jemalloc}"
}

# runtime_env CONF: the env(1) arguments that run the runtime with MALLOC_CONF=CONF, or unset.
runtime_env() {
  runtime_env_args=(-u MALLOC_CONF)
  [[ -n "$1" ]] && runtime_env_args+=(MALLOC_CONF="$1")
  return 0
}

# ------------------------------------------------------------------ broker + data
bench_start_kafka
log "generating $N records"
records_file="$work/records.jsonl"
python3 "$bench/gen_records.py" "$N" "$records_file" >&2

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
# bg_switches PID: "<jemalloc background threads> <their context switches so far>"
bg_switches() {
  local t n=0 sw=0
  for t in /proc/"$1"/task/*; do
    [[ "$(cat "$t/comm" 2>/dev/null)" == jemalloc_bg_thd ]] || continue
    n=$((n + 1)) sw=$((sw + $(awk '/ctxt_switches/ {s += $2} END {print s}' "$t/status")))
  done
  echo "$n $sw"
}
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.2f", k / 1024}'; }

# write_config DIR TAG COUNT: DIR/runtime.toml and COUNT stdout sinks (include_metadata: the
# sink's default, a JSON envelope per record) in DIR/sinks.d, sink i on topic mem-TAG-i in group
# picomq-connect-sink-mem-TAG-i.
write_config() {
  local dir="$1" tag="$2" count="$3" i
  bench_write_runtime_config "$dir"
  for ((i = 1; i <= count; i++)); do
    bench_write_sink_definition "$dir/sinks.d/s$i.toml" "s$i" libpicomq_connector_stdout_sink \
      "picomq-connect-sink-mem-$tag-$i" "mem-$tag-$i" 1000 ""
  done
}

# start_runtime DIR CONF COUNT: creates the topics, starts the runtime on DIR/runtime.toml
# (MALLOC_CONF=CONF, or unset), waits until the status file lists COUNT sinks each with its
# partition assigned, then IDLE_SETTLE seconds. Sets runtime_pid.
start_runtime() {
  local dir="$1" conf="$2" count="$3" t0
  runtime_env "$conf"
  env "${runtime_env_args[@]}" "$bin" --config "$dir/runtime.toml" > /dev/null 2> "$dir/stderr.log" &
  runtime_pid=$!
  runtime_pids+=("$runtime_pid")
  t0=$SECONDS
  until python3 - "$dir/status.json" "$count" <<'PY' 2>/dev/null
import json, sys
s = json.load(open(sys.argv[1]))["sinks"]
ok = len(s) == int(sys.argv[2]) and all(x["state"] == "running" and x["blocks"] and all(b["assigned"] for b in x["blocks"]) for x in s)
sys.exit(0 if ok else 1)
PY
  do
    kill -0 "$runtime_pid" 2>/dev/null || { echo "the runtime exited during start-up" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
    ((SECONDS - t0 < 60)) || { echo "sinks not all assigned within 60 s" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
    sleep 0.1
  done
  sleep "$IDLE_SETTLE"
}

# stop_runtime DIR: SIGTERM, and exits 1 unless the runtime then exits 0.
stop_runtime() {
  local rc=0
  kill -TERM "$runtime_pid"
  wait "$runtime_pid" || rc=$?
  runtime_pids=()
  ((rc == 0)) || { echo "the runtime exited with $rc" >&2; tail -20 "$1/stderr.log" >&2; exit 1; }
}

topic_list() {  # TAG COUNT
  local i; for ((i = 1; i <= $2; i++)); do echo "mem-$1-$i"; done
}

strict_failed=0
for ((v = 0; v < ${#variants[@]}; v++)); do
  conf="${variants[$v]}" tag="v$((v + 1))" dir="$work/v$((v + 1))"
  label="${conf:+MALLOC_CONF=$conf}"; label="${label:-built-in}"
  effective="$(effective_conf "$conf")"
  read -r load1 load5 load15 _ < /proc/loadavg
  log "variant $label (jemalloc: $effective), load average $load1 $load5 $load15"

  # -- idle, then load, then settle
  # shellcheck disable=SC2046
  "$helper" createtopics "$bootstrap" 1 $(topic_list "$tag" "$SINKS") || exit 1
  write_config "$dir" "$tag" "$SINKS"
  start_runtime "$dir" "$conf" "$SINKS"
  idle_kb="$(rss_kb "$runtime_pid")" idle_cpu="$(cpu_s "$runtime_pid")"
  log "  idle: $(mib "$idle_kb") MiB"

  waits=()
  for topic in $(topic_list "$tag" "$SINKS"); do
    kcat -P -b "$bootstrap" -t "$topic" -l -z none \
      -X linger.ms=20 -X batch.num.messages=10000 -X queue.buffering.max.messages=500000 "$records_file"
    end_offset="$("$helper" endoffset "$bootstrap" "$topic" 0)"
    [[ "$end_offset" == "$N" ]] || { echo "$topic: end offset $end_offset != $N records" >&2; exit 1; }
    waits+=("picomq-connect-sink-$topic" "$topic" "$N")
  done
  wait_result="$("$helper" waitcommitted "$bootstrap" $((120 + N / 2000)) "${waits[@]}")" ||
    { tail -20 "$dir/stderr.log" >&2; exit 1; }
  peak_kb="$(hwm_kb "$runtime_pid")"
  curve=("$(rss_kb "$runtime_pid")")
  for ((s = 1; s <= SETTLE; s++)); do
    sleep 1; curve+=("$(rss_kb "$runtime_pid")")
    ((s == SETTLE - 2)) && read -r _ bg_sw0 <<< "$(bg_switches "$runtime_pid")"
  done
  after_kb="${curve[-1]}" after_cpu="$(cpu_s "$runtime_pid")"
  # the background threads' wake-ups over the last 2 s of the settling period (once RSS is flat)
  read -r bg_threads bg_sw1 <<< "$(bg_switches "$runtime_pid")"
  bg_wakeups=$(( SETTLE >= 3 ? bg_sw1 - bg_sw0 : -1 ))
  printf '%s\n' "${curve[@]}" > "$dir/after_curve_kb.txt"
  stop_runtime "$dir"
  log "  all committed ($wait_result after the last produce); peak $(mib "$peak_kb") MiB," \
      "after $SETTLE s $(mib "$after_kb") MiB (curve kB: ${curve[*]})"

  # -- idle with EXTRA more sinks
  extra_idle_kb=""
  if ((EXTRA > 0)); then
    # shellcheck disable=SC2046
    "$helper" createtopics "$bootstrap" 1 $(topic_list "${tag}x" $((SINKS + EXTRA))) || exit 1
    write_config "$dir-extra" "${tag}x" $((SINKS + EXTRA))
    start_runtime "$dir-extra" "$conf" $((SINKS + EXTRA))
    extra_idle_kb="$(rss_kb "$runtime_pid")"
    stop_runtime "$dir-extra"
    log "  idle with $((SINKS + EXTRA)) sinks: $(mib "$extra_idle_kb") MiB"
  fi

  line="$(python3 - "$label" "$effective" "$SINKS" "$N" "$idle_kb" "$peak_kb" "$after_kb" "$SETTLE" "$TARGET" \
            "$(IFS=,; echo "${curve[*]}")" "$idle_cpu" "$after_cpu" "$EXTRA" "$extra_idle_kb" "$load1 $load5 $load15" \
            "$(nproc)" "$bg_threads" "$bg_wakeups" <<'PY'
import json, sys
(label, effective, sinks, n, idle, peak, after, settle, target, curve, idle_cpu, after_cpu, extra, extra_idle,
 load, cores, bg_threads, bg_wakeups) = sys.argv[1:]
mib = lambda kb: round(int(kb) / 1024, 2)
ratio = int(after) / int(idle)
out = {"bench": "memory", "variant": label, "jemalloc": effective, "sinks": int(sinks), "records_per_topic": int(n),
       "idle_mib": mib(idle), "peak_mib": mib(peak), "after_load_mib": mib(after), "settle_s": int(settle),
       "ratio_after_idle": round(ratio, 3), "target": float(target),
       "result": "PASS" if ratio <= float(target) else "NOT met",
       "after_curve_mib": [mib(k) for k in curve.split(",")],
       "load_cpu_s": round(float(after_cpu) - float(idle_cpu), 2),
       "jemalloc_bg_threads": int(bg_threads)}
if int(bg_wakeups) >= 0:
    out["bg_wakeups_last_2s"] = int(bg_wakeups)
if int(extra) > 0:
    out[f"idle_mib_{int(sinks) + int(extra)}_sinks"] = mib(extra_idle)
    out["per_extra_idle_sink_mib"] = round((int(extra_idle) - int(idle)) / 1024 / int(extra), 2)
out["load_avg"] = [float(x) for x in load.split()]
out["cores"] = int(cores)
print(json.dumps(out))
PY
)"
  echo "$line"
  echo "$line" >> "$work/results.jsonl"
  if [[ -z "$conf" && "$STRICT" == 1 && "$line" != *'"result": "PASS"'* ]]; then strict_failed=1; fi
done

read -r load1 load5 load15 _ < /proc/loadavg
log "done; load average now $load1 $load5 $load15"
((strict_failed == 0)) || { echo "the built-in allocator options miss the target" >&2; exit 1; }
