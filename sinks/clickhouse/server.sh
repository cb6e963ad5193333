#!/usr/bin/env bash
# Starts / stops a throwaway ClickHouse server (Debian's clickhouse-server 18.16) for the tests.
#   server.sh start  <dir> [--owner <pid>]
#       first time: writes a minimal config into <dir> (data, logs, tmp all under <dir>: nothing
#       under /var or /etc), timezone UTC, listening on 127.0.0.1 only on two free ports (HTTP and
#       native TCP); starts clickhouse-server as one plain process (not a daemon), waits until
#       /ping answers, and prints the HTTP port alone on stdout (the TCP port is in <dir>/tcp_port).
#       Users: "default" (no password) and "writer" (password "picomq-test-password"), both with
#       every right; "readonly" (no password, readonly = 1) for refusal tests.
#       Again after stop: the same data dir and ports (an outage rather than a new server).
#       --owner: a watchdog stops the server when that process is gone (a crashed test binary
#       leaves no server behind).
#   server.sh stop   <dir>   SIGTERM, then SIGKILL after 15 s; idempotent
#   server.sh kill   <dir>   SIGKILL at once (a crash of the server)
#   server.sh status <dir>   exit 0 when running, 3 when not
# PICOMQ_CLICKHOUSE_ENGINE=chdb: the current engine instead (chDB from the tools' virtualenv behind
# tests/chdb_http.py, ClickHouse's HTTP interface as the sink uses it; the same users, data under
# <dir>, kept across stop/kill and start). Unset or "18.16": Debian's server.
set -euo pipefail
server_bin="${CLICKHOUSE_SERVER:-/usr/sbin/clickhouse-server}"
engine="${PICOMQ_CLICKHOUSE_ENGINE:-18.16}"
script_dir="$(dirname "$(realpath "${BASH_SOURCE[0]}")")"
chdb_python="${PICOMQ_CHDB_PYTHON:-$script_dir/../../tools/venv/bin/python}"
cmd="${1:?start|stop|kill|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
source "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/../../sinkkit/testing/server-watchdog.sh"
shift 2

fail() {
  echo "clickhouse: $*" >&2
  for f in "$dir/log/server.err.log" "$dir/stdout.log"; do
    if [[ -s "$f" ]]; then echo "clickhouse: last lines of $f:" >&2; tail -20 "$f" >&2; fi
  done
  exit 1
}

running() { [[ -f "$dir/server.pid" ]] && kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {
  local http_port="$1" tcp_port="$2"
  mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/log" "$dir/format_schemas"
  cat > "$dir/config.xml" <<CONF
<?xml version="1.0"?>
<!-- sinks/clickhouse/server.sh: one process, everything under $dir. -->
<yandex>
  <logger>
    <level>information</level>
    <log>$dir/log/server.log</log>
    <errorlog>$dir/log/server.err.log</errorlog>
    <size>100M</size>
    <count>1</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$http_port</http_port>
  <tcp_port>$tcp_port</tcp_port>
  <max_connections>1024</max_connections>
  <keep_alive_timeout>30</keep_alive_timeout>
  <max_concurrent_queries>100</max_concurrent_queries>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <mark_cache_size>67108864</mark_cache_size>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path>
  <format_schema_path>$dir/format_schemas/</format_schema_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <umask>022</umask>
  <builtin_dictionaries_reload_interval>0</builtin_dictionaries_reload_interval>
</yandex>
CONF
  cat > "$dir/users.xml" <<'USERS'
<?xml version="1.0"?>
<yandex>
  <profiles>
    <default><max_memory_usage>2000000000</max_memory_usage></default>
    <readonly><readonly>1</readonly></readonly>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
    <writer>
      <password>picomq-test-password</password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </writer>
    <readonly>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>readonly</profile>
      <quota>default</quota>
    </readonly>
  </users>
  <quotas>
    <default>
      <interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows>
        <read_rows>0</read_rows><execution_time>0</execution_time></interval>
    </default>
  </quotas>
</yandex>
USERS
  echo "$http_port" > "$dir/http_port"
  echo "$tcp_port" > "$dir/tcp_port"
}

answers() { curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$1/ping"; }

stop_server() {  # <signal>...
  stop_pid "$dir/server.pid" 15 "$@" || fail "could not stop clickhouse-server (pid $(cat "$dir/server.pid"))"
}

# Starts the configured server; 0 once /ping answers, 1 if it died or did not answer in 20 s.
launch() {
  local port pid
  port="$(cat "$dir/http_port")"
  : > "$dir/stdout.log"
  if [[ "$engine" == chdb ]]; then
    mkdir -p "$dir/chdb"
    (cd "$dir" && exec "$chdb_python" "$script_dir/tests/chdb_http.py" --port "$port" --path "$dir/chdb") \
      </dev/null >>"$dir/stdout.log" 2>&1 &
  else
    # The server refuses to start as root on a data dir owned by another user, not as root itself;
    # the config's paths are ours. cd: it resolves some relative paths against the working dir.
    (cd "$dir" && exec "$server_bin" --config-file="$dir/config.xml") </dev/null >>"$dir/stdout.log" 2>&1 &
  fi
  pid=$!
  for _ in $(seq 1 400); do
    if answers "$port"; then
      echo "$pid" > "$dir/server.pid"
      return 0
    fi
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
      *) echo "clickhouse: unknown option $1" >&2; exit 2 ;;
    esac
  done
  case "$engine" in
    chdb) [[ -x "$chdb_python" ]] || { echo "clickhouse: $chdb_python missing: run scripts/setup.sh (chdb)" >&2; exit 1; } ;;
    18.16) [[ -x "$server_bin" ]] || { echo "clickhouse: $server_bin missing: run scripts/setup.sh (clickhouse-server)" >&2; exit 1; } ;;
    *) echo "clickhouse: PICOMQ_CLICKHOUSE_ENGINE is 18.16 or chdb, not '$engine'" >&2; exit 2 ;;
  esac
  mkdir -p "$dir"
  if running; then
    echo "clickhouse: already running in $dir" >&2
  elif [[ -f "$dir/config.xml" ]]; then
    launch || fail "did not start again on 127.0.0.1:$(cat "$dir/http_port")"
  else
    # A port is free when chosen and taken by the server a moment later: another process can
    # win that race, so try a few.
    for attempt in 1 2 3 4 5; do
      write_config "$(free_port)" "$(free_port)"
      launch && break
      echo "clickhouse: attempt $attempt on port $(cat "$dir/http_port") failed" >&2
      [[ "$attempt" == 5 ]] && fail "did not start"
    done
  fi
  if [[ -n "$owner" ]]; then start_watchdog clickhouse-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  cat "$dir/http_port"
  ;;
stop|kill)
  [[ -d "$dir" ]] || exit 0
  if [[ "$cmd" == kill ]]; then stop_server KILL; else stop_server TERM KILL; fi
  if [[ "$cmd" == stop ]]; then stop_watchdog; fi
  ;;
status)
  if running; then echo "clickhouse: running in $dir"; exit 0; fi
  echo "clickhouse: not running in $dir"; exit 3
  ;;
*) echo "usage: $0 start <dir> [--owner <pid>] | stop <dir> | kill <dir> | status <dir>" >&2; exit 2 ;;
esac
