#!/usr/bin/env bash
# Starts / stops a throwaway FerretDB v1.24.2 (MongoDB wire protocol, reports MongoDB 7.0 / wire
# 21) on a throwaway PostgreSQL 15 (sinks/postgres/server.sh): the MongoDB sink's test server.
# There is no mongod on these machines; FerretDB is the real server the tests write to.
#   server.sh start  <dir> [--owner <pid>]
#       first time: PostgreSQL in <dir>/pg and FerretDB on two free loopback ports; prints the
#       MongoDB port alone on stdout (the PostgreSQL port is in <dir>/pg_port). FerretDB is built
#       once per machine by build-ferretdb.sh (cached outside the clone).
#       Again after stop/kill: the same data and ports. --owner: a watchdog stops both servers
#       when that process is gone (a crashed test binary leaves no server behind).
#   server.sh stop         <dir>   FerretDB (TERM, then KILL after 10 s), then PostgreSQL; idempotent
#   server.sh kill         <dir>   SIGKILL FerretDB at once (a crash); PostgreSQL keeps running
#   server.sh backend-stop <dir>   stops PostgreSQL only: FerretDB answers, its writes fail (an outage)
#   server.sh backend-start <dir>  PostgreSQL back on the same port and data
#   server.sh status       <dir>   exit 0 when FerretDB runs, 3 when not
# Why PostgreSQL rather than SQLite: it is FerretDB's main backend (the one its MongoDB
# compatibility is tested on), the project already runs it for the Postgres sink, and it can be
# taken down under a running FerretDB, which is the backing-database outage the tests need.
set -euo pipefail
here="$(dirname "$(realpath "${BASH_SOURCE[0]}")")"
cmd="${1:?start|stop|kill|backend-stop|backend-start|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
source "$here/../../sinkkit/testing/server-watchdog.sh"
shift 2
pg="$here/../postgres/server.sh"
# FerretDB's storage, not what the MongoDB sink's tests are about: Debian's PostgreSQL 15 whatever
# PICOMQ_PG_VERSION says (the PostgreSQL version matrix is the PostgreSQL and Redshift sinks').
export PICOMQ_PG_VERSION=15

fail() {
  echo "ferretdb: $*" >&2
  if [[ -s "$dir/ferretdb.log" ]]; then echo "ferretdb: last lines of $dir/ferretdb.log:" >&2; tail -20 "$dir/ferretdb.log" >&2; fi
  exit 1
}
running() { [[ -f "$dir/ferretdb.pid" ]] && kill -0 "$(cat "$dir/ferretdb.pid")" 2>/dev/null; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts FerretDB on the configured ports; 0 once its port accepts connections.
launch() {
  local port pg_port bin pid
  port="$(cat "$dir/port")"; pg_port="$(cat "$dir/pg_port")"
  bin="$(bash "$here/build-ferretdb.sh")" || fail "no FerretDB binary (sinks/mongodb/build-ferretdb.sh failed)"
  mkdir -p "$dir/state"
  "$bin" --handler=postgresql --postgresql-url="postgres://postgres@127.0.0.1:$pg_port/postgres" \
    --listen-addr="127.0.0.1:$port" --debug-addr=- --state-dir="$dir/state" --telemetry=disable \
    --log-level=warn </dev/null >>"$dir/ferretdb.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do
    if answers "$port"; then echo "$pid" > "$dir/ferretdb.pid"; return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 1
}

stop_ferretdb() { stop_pid "$dir/ferretdb.pid" 10 TERM KILL || fail "could not stop FerretDB"; }

case "$cmd" in
start)
  owner=""
  while (($#)); do
    case "$1" in
      --owner) owner="${2:?--owner needs a pid}"; shift 2 ;;
      *) echo "ferretdb: unknown option $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$dir"
  chmod 0755 "$dir"  # PostgreSQL runs as the postgres user under it
  if running; then
    echo "ferretdb: already running in $dir" >&2
  else
    [[ -f "$dir/port" ]] || { free_port > "$dir/port"; free_port > "$dir/pg_port"; }
    bash "$pg" start "$dir/pg" "$(cat "$dir/pg_port")" >&2 || fail "its PostgreSQL did not start"
    launch || fail "did not start on 127.0.0.1:$(cat "$dir/port")"
  fi
  if [[ -n "$owner" ]]; then start_watchdog ferretdb-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  cat "$dir/port"
  ;;
stop)
  [[ -d "$dir" ]] || exit 0
  stop_ferretdb
  bash "$pg" stop "$dir/pg" >&2 || true
  stop_watchdog
  ;;
kill) stop_pid "$dir/ferretdb.pid" 5 KILL || fail "could not kill FerretDB" ;;
backend-stop) bash "$pg" stop "$dir/pg" >&2 ;;
backend-start) bash "$pg" start "$dir/pg" "$(cat "$dir/pg_port")" >&2 ;;
status)
  if running; then echo "ferretdb: running in $dir"; exit 0; fi
  echo "ferretdb: not running in $dir"; exit 3
  ;;
*) echo "usage: $0 start <dir> [--owner <pid>] | stop | kill | backend-stop | backend-start | status <dir>" >&2; exit 2 ;;
esac
