#!/usr/bin/env bash
# Starts / stops a throwaway SurrealDB 3.3.5 server (the build unpacked by fetch-server.sh): the
# SurrealDB sink's test server. Persistent storage (surrealkv in <dir>/data), so a kill and a
# start keep the data, root user root / root, HTTP on a free loopback port.
#   server.sh start  <dir> [--owner <pid>]   prints the port alone on stdout; again after
#                                            stop/kill: the same data and port. --owner: a
#                                            watchdog stops the server when that process is gone.
#   server.sh stop   <dir>   SIGTERM (graceful), KILL after 10 s; idempotent
#   server.sh kill   <dir>   SIGKILL at once (a crash)
#   server.sh status <dir>   exit 0 when it runs, 3 when not
# Exit 3 from start: no server binary on this machine (fetch-server.sh says why on stderr).
set -euo pipefail
here="$(dirname "$(realpath "${BASH_SOURCE[0]}")")"
cmd="${1:?start|stop|kill|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
source "$here/../../sinkkit/testing/server-watchdog.sh"
shift 2

fail() {
  echo "surrealdb: $*" >&2
  if [[ -s "$dir/surreal.log" ]]; then echo "surrealdb: last lines of $dir/surreal.log:" >&2; tail -20 "$dir/surreal.log" >&2; fi
  exit 1
}
running() { [[ -f "$dir/surreal.pid" ]] && kill -0 "$(cat "$dir/surreal.pid")" 2>/dev/null; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
healthy() { curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$1/health"; }

launch() {
  local port bin pid rc=0
  port="$(cat "$dir/port")"
  bin="$(bash "$here/fetch-server.sh")" || rc=$?
  ((rc == 0)) || exit "$rc"
  mkdir -p "$dir/data"
  "$bin" start --bind "127.0.0.1:$port" --user root --pass root --no-banner --log warn \
    "surrealkv://$dir/data" </dev/null >>"$dir/surreal.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    if healthy "$port"; then echo "$pid" > "$dir/surreal.pid"; return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 1
}

case "$cmd" in
start)
  owner=""
  while (($#)); do
    case "$1" in
      --owner) owner="${2:?--owner needs a pid}"; shift 2 ;;
      *) echo "surrealdb: unknown option $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$dir"
  if running; then
    echo "surrealdb: already running in $dir" >&2
  else
    [[ -f "$dir/port" ]] || free_port > "$dir/port"
    launch || fail "did not start on 127.0.0.1:$(cat "$dir/port")"
  fi
  if [[ -n "$owner" ]]; then start_watchdog surrealdb-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  cat "$dir/port"
  ;;
stop)
  [[ -d "$dir" ]] || exit 0
  stop_pid "$dir/surreal.pid" 10 TERM KILL || fail "could not stop SurrealDB"
  stop_watchdog
  ;;
kill) stop_pid "$dir/surreal.pid" 5 KILL || fail "could not kill SurrealDB" ;;
status)
  if running; then echo "surrealdb: running in $dir"; exit 0; fi
  echo "surrealdb: not running in $dir"; exit 3
  ;;
*) echo "usage: $0 start <dir> [--owner <pid>] | stop | kill | status <dir>" >&2; exit 2 ;;
esac
