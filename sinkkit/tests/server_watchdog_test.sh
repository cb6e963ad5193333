#!/usr/bin/env bash
# The test servers' watchdog (sinkkit/testing/server-watchdog.sh) through a script that sources
# it: a server started with an owner stops once that owner is gone, and `stop` ends the watchdog
# with the server.
#   server_watchdog_test.sh nginx <nginx.sh>      (the kit's, in the tree or installed)
#   server_watchdog_test.sh postgres <server.sh>  (sinks/postgres/server.sh)
#   server_watchdog_test.sh clickhouse <server.sh>  (sinks/clickhouse/server.sh)
#   server_watchdog_test.sh seaweedfs <server.sh>   (sinks/s3/server.sh)
#   server_watchdog_test.sh ferretdb <server.sh>    (sinks/mongodb/server.sh)
#   server_watchdog_test.sh influxdb <server.sh>    (sinks/influxdb/server.sh, InfluxDB 1.6.7)
#   server_watchdog_test.sh surrealdb <server.sh>   (sinks/surrealdb/server.sh)
set -euo pipefail
kind="${1:?nginx|postgres|clickhouse|seaweedfs|ferretdb|influxdb|surrealdb}"; script="${2:?script}"
work="$(mktemp -d /tmp/picomq-watchdog.XXXXXX)"
chmod o+x "$work"  # postgres runs as its own user when we are root: it must reach its folder
owners=()
cleanup() {
  for pid in "${owners[@]}"; do kill "$pid" 2>/dev/null || true; done
  for dir in "$work"/*/; do [[ -d "$dir" ]] && bash "$script" stop "$dir" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "server_watchdog_test ($kind): $*" >&2; exit 1; }

# A stand-in for the test process that starts the server.
new_owner() {
  sleep 600 &
  owners+=("$!")
  owner="$!"
}

start() {  # <dir> <owner-pid>
  case "$kind" in
    nginx | clickhouse | seaweedfs | ferretdb | surrealdb) bash "$script" start "$1" --owner "$2" >/dev/null ;;
    influxdb) bash "$script" start "$1" 1 --owner "$2" >/dev/null ;;
    postgres)
      local port
      port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
      bash "$script" start "$1" "$port" "$2" >/dev/null ;;
    *) fail "unknown kind" ;;
  esac
}

running() { bash "$script" status "$1" >/dev/null 2>&1; }

# Waits up to 20 s (the watchdog polls once a second) for `$@` to fail.
until_false() {
  for _ in $(seq 1 200); do "$@" || return 0; sleep 0.1; done
  return 1
}

# 1. The owner dies: the watchdog stops the server and itself.
new_owner
start "$work/orphaned" "$owner"
running "$work/orphaned" || fail "did not start"
watchdog="$(cat "$work/orphaned/watchdog.pid")"
kill -0 "$watchdog" || fail "no watchdog after start"
sleep 1.5
running "$work/orphaned" || fail "stopped while its owner is alive"
kill "$owner"
until_false running "$work/orphaned" || fail "still running 20 s after its owner died"
until_false kill -0 "$watchdog" 2>/dev/null || fail "the watchdog outlived the server"
[[ ! -e "$work/orphaned/watchdog.pid" ]] || fail "the watchdog left its pid file"

# 2. An explicit stop ends the watchdog too, while the owner lives on.
new_owner
start "$work/stopped" "$owner"
watchdog="$(cat "$work/stopped/watchdog.pid")"
bash "$script" stop "$work/stopped" >/dev/null
running "$work/stopped" && fail "running after stop"
until_false kill -0 "$watchdog" 2>/dev/null || fail "stop left the watchdog running"
[[ ! -e "$work/stopped/watchdog.pid" ]] || fail "stop left the watchdog's pid file"

echo "server_watchdog_test ($kind): ok"
