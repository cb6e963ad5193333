#!/usr/bin/env bash
# Starts / stops the test schema registry (schema_registry.py: the Confluent-compatible REST API
# subset that Karapace implements; see that file for why it is not Karapace itself).
#   schema_registry.sh start <dir> <port> [owner-pid]  starts it (state in <dir>/state.json, kept across
#                                                     stop/start: an outage, not a new registry); waits until
#                                                     it answers. With owner-pid, it stops when that process is gone.
#   schema_registry.sh stop  <dir>                    stops it; idempotent
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="$here/../../tools/venv/bin/python"
[[ -x "$python" ]] || python=python3
cmd="${1:?start|stop}"; dir="${2:?dir}"
mkdir -p "$dir"

case "$cmd" in
start)
  port="${3:?port}"; owner="${4:-}"
  if [[ -f "$dir/registry.pid" ]] && kill -0 "$(cat "$dir/registry.pid")" 2>/dev/null; then
    echo "registry: already running"; exit 0
  fi
  setsid nohup "$python" "$here/schema_registry.py" "$port" "$dir/state.json" </dev/null >>"$dir/registry.log" 2>&1 &
  pid=$!
  echo "$pid" > "$dir/registry.pid"
  if [[ -n "$owner" ]]; then
    setsid nohup bash -c 'while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done; kill "$2" 2>/dev/null' \
      registry-watchdog "$owner" "$pid" </dev/null >/dev/null 2>&1 &
  fi
  for _ in $(seq 1 100); do
    if curl -sf "http://127.0.0.1:$port/subjects" >/dev/null 2>&1; then echo "registry: up on 127.0.0.1:$port"; exit 0; fi
    kill -0 "$pid" 2>/dev/null || { echo "registry: died"; tail -20 "$dir/registry.log"; exit 1; }
    sleep 0.1
  done
  echo "registry: no answer on 127.0.0.1:$port within 10s"; tail -20 "$dir/registry.log"; exit 1
  ;;
stop)
  if [[ -f "$dir/registry.pid" ]]; then
    pid="$(cat "$dir/registry.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/registry.pid"
  fi
  ;;
*) echo "usage: $0 start <dir> <port> [owner-pid] | stop <dir>" >&2; exit 2 ;;
esac
