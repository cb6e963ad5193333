#!/usr/bin/env bash
# Starts / stops a throwaway PostgreSQL server for the tests, of the major version
# PICOMQ_PG_VERSION: 18 (the default, what CI runs: Maven Central's build, unpacked once per
# machine by fetch-server.sh, fetched here on first use) or 15 (Debian's postgresql-15, the oldest
# the docs support; `bash scripts/matrix.sh` runs both).
#   server.sh start  <dir> <port> [owner-pid]
#       first time: initdb into <dir>/data (superuser "postgres", trust auth, UTF8), then starts it
#       listening on 127.0.0.1:<port> with its unix socket in <dir>/sock; waits until pg_isready.
#       Again after stop: starts the same data dir (an outage rather than a new server).
#       Already running: says so and succeeds. With owner-pid, a watchdog stops the server when
#       that process is gone (a crashed test binary leaves no server behind).
#       PICOMQ_PG_CONF: lines added to the new cluster's postgresql.conf (a test's own settings).
#   server.sh stop   <dir>   fast shutdown; idempotent (nothing running is fine)
#   server.sh status <dir>   exit 0 when running, 3 when not
#   A cluster keeps the binaries it was made with (<dir>/pg_bin): a restart, a stop or a status
#   use them whatever PICOMQ_PG_VERSION says then.
# PostgreSQL refuses to run as root: as root, every server command runs as the "postgres" user
# (runuser) and <dir> is handed to that user. As any other user it runs as that user.
set -euo pipefail
cmd="${1:?start|stop|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
here="$(dirname "$(realpath "${BASH_SOURCE[0]}")")"
if [[ -f "$dir/pg_bin" ]]; then
  bin="$(cat "$dir/pg_bin")"
elif [[ "$cmd" == start ]]; then
  bin="$(bash "$here/fetch-server.sh" --bin "${PICOMQ_PG_VERSION:-18}")" || exit 1
else
  bin=/usr/lib/postgresql/15/bin
fi
# The client tool of Debian's postgresql-15 (the Maven Central builds carry the server's alone).
pg_isready=/usr/lib/postgresql/15/bin/pg_isready
data="$dir/data"; sock="$dir/sock"; log="$dir/server.log"
# start_watchdog / stop_watchdog, shared with the kit's nginx.sh.
source "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/../../sinkkit/testing/server-watchdog.sh"

as_pg() {
  if ((EUID == 0)); then (cd / && runuser -u postgres -- "$@"); else (cd / && "$@"); fi
}

fail() {
  echo "postgres: $*" >&2
  if [[ -f "$log" ]]; then echo "postgres: last lines of $log:" >&2; tail -30 "$log" >&2; fi
  exit 1
}

running() { [[ -f "$data/PG_VERSION" ]] && as_pg "$bin/pg_ctl" status -D "$data" >/dev/null 2>&1; }

stop_server() {
  [[ -f "$data/PG_VERSION" ]] || return 0
  running || return 0
  as_pg "$bin/pg_ctl" stop -D "$data" -m fast -w -t 30 >/dev/null 2>>"$log" ||
    as_pg "$bin/pg_ctl" stop -D "$data" -m immediate -w -t 30 >/dev/null 2>>"$log" ||
    fail "could not stop the server in $data"
}

case "$cmd" in
start)
  port="${3:?port}"; owner="${4:-}"
  [[ -x "$bin/initdb" ]] || { echo "postgres: $bin/initdb missing: run scripts/setup.sh (postgresql-15)" >&2; exit 1; }
  [[ -x "$pg_isready" ]] || { echo "postgres: $pg_isready missing: run scripts/setup.sh (postgresql-15)" >&2; exit 1; }
  mkdir -p "$dir"
  if ((EUID == 0)); then
    id postgres >/dev/null 2>&1 || { echo "postgres: no 'postgres' user: install postgresql-15" >&2; exit 1; }
    chown postgres:postgres "$dir"; chmod 0700 "$dir"
  fi
  as_pg test -w "$dir" -a -x "$dir" ||
    { echo "postgres: $dir is not writable by the postgres user (are its parent folders searchable, o+x?)" >&2; exit 1; }
  if running; then
    echo "postgres: already running in $data"
  else
    if [[ ! -f "$data/PG_VERSION" ]]; then
      rm -rf "$data"
      as_pg mkdir -p "$sock"
      echo "$bin" | as_pg tee "$dir/pg_bin" >/dev/null
      as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 --no-sync \
        > "$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; rm -rf "$data"; fail "initdb failed in $data"; }
      # Test settings: durability is not what the tests are about.
      as_pg tee -a "$data/postgresql.conf" >/dev/null <<CONF

# --- sinks/postgres/server.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
CONF
      # A test's own settings for its server (e.g. wal_level = logical for a change-event source).
      if [[ -n "${PICOMQ_PG_CONF:-}" ]]; then printf '%s\n' "$PICOMQ_PG_CONF" | as_pg tee -a "$data/postgresql.conf" >/dev/null; fi
    fi
    # pg_ctl -w waits until the server accepts connections (or says why it died).
    as_pg "$bin/pg_ctl" start -D "$data" -l "$log" -w -t 60 -o "-p $port" >/dev/null 2>&1 ||
      fail "server did not start on 127.0.0.1:$port"
  fi
  for _ in $(seq 1 100); do
    if "$pg_isready" -q -h 127.0.0.1 -p "$port" -t 1; then break; fi
    running || fail "server died"
    sleep 0.1
  done
  "$pg_isready" -q -h 127.0.0.1 -p "$port" -t 1 || fail "server does not answer on 127.0.0.1:$port within 10s"
  if [[ -n "$owner" ]]; then start_watchdog pg-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  echo "postgres: up on 127.0.0.1:$port"
  ;;
stop)
  [[ -d "$dir" ]] || exit 0
  stop_server
  stop_watchdog
  ;;
status)
  if running; then echo "postgres: running in $data"; exit 0; fi
  echo "postgres: not running in $data"; exit 3
  ;;
*) echo "usage: $0 start <dir> <port> [owner-pid] | stop <dir> | status <dir>" >&2; exit 2 ;;
esac
