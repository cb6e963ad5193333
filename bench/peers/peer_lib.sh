# shellcheck shell=bash
# What every peer script does the same way (sourced; bench/peers/README.md): start the peer system
# in the background, poll the destination until it holds the N records, measure the peer's process
# tree, print the one JSON line the adapters read, stop the peer.
#
#   source peer_lib.sh; peer_init NAME
#   peer_start LOGFILE CMD...          launch (its stdout and stderr into LOGFILE); the clock starts
#   peer_wait N count_fn [failed_fn]   poll: count_fn sets $count (what the destination holds);
#                                      failed_fn, every 20 polls, returns 0 when the peer's log says
#                                      it failed for good (it prints why)
#   peer_report SYSTEM [EXTRA_JSON]    one line: {"system","records","wall_s","startup_s","load_s",
#                                      "cpu_s","load_cpu_s","rss_kb"[,"server_cpu_s"]EXTRA}
# wall_s: launch -> count_fn saw N; startup_s: launch -> it saw the first record; cpu_s: utime +
# stime of the peer's process tree (children included) at that moment, load_cpu_s the part after the
# first record; rss_kb: peak RSS (VmHWM) of the peer's largest process.
# Environment: PEER_POLL_MS (150), PEER_TIMEOUT_S (300 + N/1000), PEER_SERVER_PID (the destination
# server's pid: also report server_cpu_s, the CPU of its process tree from launch to the end, counted
# as bench/bench_helper.c --server counts it; the polling's own queries are in it).
# Callers may add to peer_cleanup_hooks (commands run at exit, after the peer is stopped).

peer_name=peer
peer_pid=""
peer_cleanup_hooks=()

peer_init() {  # NAME
  peer_name="$1"
  trap peer_cleanup EXIT
  trap 'exit 130' INT TERM
}

log() { printf '[%s %(%H:%M:%S)T] %s\n' "$peer_name" -1 "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

peer_cleanup() {
  local rc=$?
  if [[ -n "$peer_pid" ]] && kill -0 "$peer_pid" 2>/dev/null; then
    kill -TERM "$peer_pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$peer_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$peer_pid" 2>/dev/null || true
    wait "$peer_pid" 2>/dev/null || true
  fi
  local hook
  for hook in ${peer_cleanup_hooks[@]+"${peer_cleanup_hooks[@]}"}; do eval "$hook" || true; done
  exit "$rc"
}

# peer_proc PID: "CPU_S HWM_KB" of the process tree of PID (utime+stime+cutime+cstime of each live
# process; the largest VmHWM among them).
peer_proc() {
  python3 - "$1" <<'PY'
import os, sys
root = int(sys.argv[1]); kids = {}; cpu = {}
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        s = open(f"/proc/{d}/stat").read()
    except OSError:
        continue
    f = s[s.rindex(")") + 2:].split()
    kids.setdefault(int(f[1]), []).append(int(d))
    cpu[int(d)] = sum(int(x) for x in f[11:15])
total, hwm, todo = 0, 0, [root]
while todo:
    p = todo.pop()
    total += cpu.get(p, 0)
    todo += kids.get(p, [])
    try:
        hwm = max(hwm, next(int(l.split()[1]) for l in open(f"/proc/{p}/status") if l.startswith("VmHWM:")))
    except (OSError, StopIteration):
        pass
print(f"{total / os.sysconf('SC_CLK_TCK'):.2f} {hwm}")
PY
}
peer_now() { date +%s.%N; }
peer_elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# peer_pg_count CONNINFO TABLE: sets count for a PostgreSQL table the peer fills — 0 while TABLE is
# missing or empty, 1 while its size still grows between two polls, its exact count(*) once it held
# still. (pg_stat_user_tables is no good here: a backend gone idle reports its inserts up to 10 s
# late, and a count(*) per poll would load the server being measured.)
peer_pg_size=-1
peer_pg_count() {
  local size
  size="$(psql "$1" -X -qAt -c "SELECT coalesce(pg_relation_size(to_regclass('$2')), -1)" 2>/dev/null || echo -1)"
  [[ "$size" =~ ^-?[0-9]+$ ]] || size=-1
  if ((size <= 0)); then count=0
  elif ((size != peer_pg_size)); then count=1
  else
    count="$(psql "$1" -X -qAt -v ON_ERROR_STOP=1 -c "SELECT count(*) FROM $2")" || die "cannot count $2"
  fi
  peer_pg_size="$size"
}

peer_start() {  # LOGFILE CMD...
  local logfile="$1"
  shift
  peer_server_cpu0=""
  if [[ -n "${PEER_SERVER_PID:-}" ]]; then
    kill -0 "$PEER_SERVER_PID" 2>/dev/null || die "PEER_SERVER_PID $PEER_SERVER_PID is not a running process"
    read -r peer_server_cpu0 _ < <(peer_proc "$PEER_SERVER_PID")
  fi
  peer_t_start="$(peer_now)"
  "$@" > "$logfile" 2>&1 &
  peer_pid=$!
  peer_log="$logfile"
}

peer_wait() {  # N COUNT_FN [FAILED_FN]
  local n="$1" count_fn="$2" failed_fn="${3:-}" polls=0 deadline sleep_s
  deadline="$(awk -v a="$peer_t_start" -v t="${PEER_TIMEOUT_S:-$((300 + n / 1000))}" 'BEGIN { printf "%.0f", a + t }')"
  sleep_s="$(awk -v m="${PEER_POLL_MS:-150}" 'BEGIN { printf "%.3f", m / 1000 }')"
  peer_t_first=""; peer_cpu_first=""; count=0
  while :; do
    kill -0 "$peer_pid" 2>/dev/null || { tail -40 "$peer_log" >&2; die "the peer exited (log: $peer_log)"; }
    "$count_fn"
    if [[ -z "$peer_t_first" ]] && ((count > 0)); then
      peer_t_first="$(peer_now)"
      read -r peer_cpu_first _ < <(peer_proc "$peer_pid")
      log "first records after $(peer_elapsed "$peer_t_start" "$peer_t_first") s"
    fi
    ((count >= n)) && break
    polls=$((polls + 1))
    if ((polls % 20 == 0)); then
      if [[ -n "$failed_fn" ]] && "$failed_fn"; then die "the peer failed (log: $peer_log)"; fi
      (($(date +%s) > deadline)) && die "the destination holds $count of $n records after ${PEER_TIMEOUT_S:-$((300 + n / 1000))} s (log: $peer_log)"
    fi
    sleep "$sleep_s"
  done
  peer_t_end="$(peer_now)"
  read -r peer_cpu_end peer_rss < <(peer_proc "$peer_pid")
  peer_server_field=""
  if [[ -n "$peer_server_cpu0" ]]; then
    local server_cpu1
    read -r server_cpu1 _ < <(peer_proc "$PEER_SERVER_PID")
    peer_server_field=",\"server_cpu_s\":$(awk -v a="$peer_server_cpu0" -v b="$server_cpu1" 'BEGIN { printf "%.2f", b - a }')"
  fi
  ((count == n)) || die "the destination holds $count records, expected $n"
  log "all $n records after $(peer_elapsed "$peer_t_start" "$peer_t_end") s; stopping the peer"
}

peer_report() {  # SYSTEM [EXTRA_JSON: ,"key":value...]
  printf '{"system":"%s","records":%d,"wall_s":%s,"startup_s":%s,"load_s":%s,"cpu_s":%s,"load_cpu_s":%s,"rss_kb":%d%s%s}\n' \
    "$1" "$count" "$(peer_elapsed "$peer_t_start" "$peer_t_end")" "$(peer_elapsed "$peer_t_start" "$peer_t_first")" \
    "$(peer_elapsed "$peer_t_first" "$peer_t_end")" "$peer_cpu_end" \
    "$(awk -v a="$peer_cpu_first" -v b="$peer_cpu_end" 'BEGIN { printf "%.2f", b - a }')" "$peer_rss" \
    "$peer_server_field" "${2:-}"
}
