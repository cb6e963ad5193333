#!/usr/bin/env bash
# Starts / stops a throwaway InfluxDB server for the InfluxDB sink's tests: 1.6.7 (the v1 API, Debian 12's influxdb package,
# authentication on) or 2.8.0 (the v2 API), (Debian's package) or built once per machine by build-influxdb.sh (2.8.0, cached
# outside the clone), on free loopback ports.
#   server.sh start <dir> <1|2> [--owner <pid>]
#       first time: a fresh server in <dir>; prints its HTTP port alone on stdout.
#         1: auth-enabled = true, an admin user picomq / picomq-secret (the first user, created
#            through /query as 1.x allows while no user exists). Databases: the tests create them.
#         2: POST /api/v2/setup: user picomq / picomq-secret, org picomq, bucket picomq, operator
#            token picomq-test-token.
#       Again after stop/kill: the same data and port. --owner: a watchdog stops the server when
#       that process is gone (a crashed test binary leaves no server behind).
#   server.sh stop   <dir>   TERM, then KILL after 10 s; idempotent
#   server.sh kill   <dir>   SIGKILL at once (a crash)
#   server.sh status <dir>   exit 0 when it runs, 3 when not
set -euo pipefail
here="$(dirname "$(realpath "${BASH_SOURCE[0]}")")"
cmd="${1:?start|stop|kill|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
source "$here/../../sinkkit/testing/server-watchdog.sh"
shift 2

fail() {
  echo "influxdb: $*" >&2
  if [[ -s "$dir/influxd.log" ]]; then echo "influxdb: last lines of $dir/influxd.log:" >&2; tail -20 "$dir/influxd.log" >&2; fi
  exit 1
}
running() { [[ -f "$dir/influxd.pid" ]] && kill -0 "$(cat "$dir/influxd.pid")" 2>/dev/null; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pinged() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/ping" 2>/dev/null | grep -q 204; }

write_v1_config() {
  cat >"$dir/influxdb.conf" <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:$(cat "$dir/rpc_port")"
[meta]
  dir = "$dir/meta"
[data]
  dir = "$dir/data"
  wal-dir = "$dir/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
[http]
  bind-address = "127.0.0.1:$(cat "$dir/port")"
  auth-enabled = true
  log-enabled = false
  flux-enabled = false
CONF
}

# Starts the server on the configured port; 0 once /ping answers.
launch() {
  local version port bin pid
  version="$(cat "$dir/version")"; port="$(cat "$dir/port")"
  bin="$(bash "$here/build-influxdb.sh" "$version")" || fail "no influxd binary (sinks/influxdb/build-influxdb.sh failed)"
  if [[ "$version" == 1 ]]; then
    write_v1_config
    "$bin" run -config "$dir/influxdb.conf" </dev/null >>"$dir/influxd.log" 2>&1 &
  else
    INFLUXD_CONFIG_PATH="$dir" "$bin" --bolt-path "$dir/influxd.bolt" --engine-path "$dir/engine" \
      --sqlite-path "$dir/influxd.sqlite" --http-bind-address "127.0.0.1:$port" --reporting-disabled \
      --log-level warn </dev/null >>"$dir/influxd.log" 2>&1 &
  fi
  pid=$!
  for _ in $(seq 1 600); do
    if pinged "$port"; then echo "$pid" > "$dir/influxd.pid"; return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 1
}

# First start only: the user (1.x) or the org, bucket and token (2.x).
initialise() {
  local port; port="$(cat "$dir/port")"
  if [[ "$(cat "$dir/version")" == 1 ]]; then
    curl -sf -XPOST "http://127.0.0.1:$port/query" \
      --data-urlencode "q=CREATE USER picomq WITH PASSWORD 'picomq-secret' WITH ALL PRIVILEGES" >/dev/null \
      || fail "could not create the admin user"
  else
    curl -sf -XPOST "http://127.0.0.1:$port/api/v2/setup" -H 'Content-Type: application/json' \
      -d '{"username":"picomq","password":"picomq-secret","org":"picomq","bucket":"picomq","token":"picomq-test-token"}' \
      >/dev/null || fail "POST /api/v2/setup failed"
  fi
  touch "$dir/initialised"
}

case "$cmd" in
start)
  version="${1:?start <dir> <1|2>}"; shift
  [[ "$version" == 1 || "$version" == 2 ]] || { echo "influxdb: version must be 1 or 2" >&2; exit 2; }
  owner=""
  while (($#)); do
    case "$1" in
      --owner) owner="${2:?--owner needs a pid}"; shift 2 ;;
      *) echo "influxdb: unknown option $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$dir"
  if running; then
    echo "influxdb: already running in $dir" >&2
  else
    [[ -f "$dir/port" ]] || { free_port > "$dir/port"; free_port > "$dir/rpc_port"; echo "$version" > "$dir/version"; }
    launch || fail "did not start on 127.0.0.1:$(cat "$dir/port")"
    [[ -f "$dir/initialised" ]] || initialise
  fi
  if [[ -n "$owner" ]]; then start_watchdog influxdb-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  cat "$dir/port"
  ;;
stop)
  [[ -d "$dir" ]] || exit 0
  stop_pid "$dir/influxd.pid" 10 TERM KILL || fail "could not stop influxd"
  stop_watchdog
  ;;
kill) stop_pid "$dir/influxd.pid" 5 KILL || fail "could not kill influxd" ;;
status)
  if running; then echo "influxdb: running in $dir"; exit 0; fi
  echo "influxdb: not running in $dir"; exit 3
  ;;
*) echo "usage: $0 start <dir> <1|2> [--owner <pid>] | stop | kill | status <dir>" >&2; exit 2 ;;
esac
