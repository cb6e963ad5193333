#!/usr/bin/env bash
# Starts / stops a throwaway SeaweedFS 4.48 server (S3 API that verifies SigV4 signatures) for the
# S3 sink's tests. The binary is fetched once per machine by fetch-seaweedfs.sh (scripts/build-test-servers.sh).
#   server.sh start  <dir> [--owner <pid>]
#       first time: identities.json (access key "picomq-test", secret "picomq-test-secret", every
#       right), data under <dir>, master / volume / filer / S3 on free 127.0.0.1 ports (each also
#       opens a gRPC port at +10000, so ports are picked with that one free too); waits until the
#       S3 port answers, prints the S3 port alone on stdout. The Iceberg REST catalog answers on
#       the fifth port of <dir>/ports (`server.sh iceberg-port <dir>` prints it).
#       Virtual-hosted requests go to <bucket>.localhost:<port> (-s3.domainName; libcurl resolves
#       *.localhost to the loopback address).
#       Again after stop: the same data dir and ports (an outage rather than a new server).
#       --owner: a watchdog stops the server when that process is gone.
#   server.sh stop   <dir>   SIGKILL (SeaweedFS can take > 15 s on SIGTERM; the tests need no
#                            clean shutdown: every object they check was acknowledged); idempotent
#   server.sh kill   <dir>   the same (a crash of the server)
#   server.sh status <dir>   exit 0 when running, 3 when not
#   server.sh iceberg-port <dir>   the Iceberg REST catalog's port
set -euo pipefail
here="$(dirname "$(realpath "${BASH_SOURCE[0]}")")"
weed="${PICOMQ_SEAWEEDFS:-${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/seaweedfs-4.48/weed}"
cmd="${1:?start|stop|kill|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
source "$here/../../sinkkit/testing/server-watchdog.sh"
shift 2

fail() {
  echo "seaweedfs: $*" >&2
  if [[ -s "$dir/server.log" ]]; then echo "seaweedfs: last lines of $dir/server.log:" >&2; tail -20 "$dir/server.log" >&2; fi
  exit 1
}

running() { [[ -f "$dir/server.pid" ]] && kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; }

# Five ports p with p and p + 10000 free (SeaweedFS's gRPC ports): p in 2000-9999, so that both
# stay below the kernel's ephemeral range (32768-60999: an outgoing connection of any process
# could take a port there while the server is down for an outage test, and the restart on the
# same ports would fail) and below the 20000-31999 the test harness picks its ports from.
free_ports() {
  python3 - <<'PY'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
ports = []
while len(ports) < 5:
    p = random.randint(2000, 9999)
    if p not in ports and free(p) and free(p + 10000):
        ports.append(p)
print(" ".join(map(str, ports)))
PY
}

write_config() {
  mkdir -p "$dir/data"
  cat > "$dir/identities.json" <<'JSON'
{"identities": [{"name": "picomq", "credentials": [{"accessKey": "picomq-test", "secretKey": "picomq-test-secret"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
  echo "$1" > "$dir/ports"
}

answers() { curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/"; }

launch() {
  local master volume filer s3 iceberg pid
  read -r master volume filer s3 iceberg < "$dir/ports"
  : > "$dir/server.log"
  # The Iceberg REST catalog (the Iceberg sink's tests) on the fifth port; the Lance namespace
  # server would take the fixed port 9101 (two servers would clash): off. Free space: weed's
  # default (1% of the disk, 2.5 GB on 252 GB) made every volume read-only on a full-ish test
  # machine and each upload waited forever for capacity; the tests need a few MB.
  (cd "$dir" && exec "$weed" -logdir="$dir" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port="$master" -volume.port="$volume" -filer.port="$filer" -s3 -s3.port="$s3" \
      -s3.config="$dir/identities.json" -volume.max=500 -volume.minFreeSpace=256MiB -master.volumeSizeLimitMB=64 -s3.port.iceberg="$iceberg" -s3.port.lance=0 -master.electionTimeout=1s -volume.preStopSeconds=0 -s3.domainName=localhost) \
    </dev/null >>"$dir/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    if answers "$s3"; then
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
      *) echo "seaweedfs: unknown option $1" >&2; exit 2 ;;
    esac
  done
  [[ -x "$weed" ]] || { echo "seaweedfs: $weed missing: run sinks/s3/fetch-seaweedfs.sh (once per machine)" >&2; exit 1; }
  mkdir -p "$dir"
  if running; then
    echo "seaweedfs: already running in $dir" >&2
  elif [[ -f "$dir/ports" ]]; then
    launch || fail "did not start again (ports $(cat "$dir/ports"))"
  else
    for attempt in 1 2 3; do
      write_config "$(free_ports)"
      launch && break
      echo "seaweedfs: attempt $attempt (ports $(cat "$dir/ports")) failed" >&2
      [[ "$attempt" == 3 ]] && fail "did not start"
    done
  fi
  if [[ -n "$owner" ]]; then start_watchdog seaweedfs-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  read -r _ _ _ s3 _ < "$dir/ports"
  echo "$s3"
  ;;
stop|kill)
  [[ -d "$dir" ]] || exit 0
  stop_pid "$dir/server.pid" 15 KILL || fail "could not stop weed (pid $(cat "$dir/server.pid"))"
  if [[ "$cmd" == stop ]]; then stop_watchdog; fi
  ;;
iceberg-port)
  read -r _ _ _ _ iceberg < "$dir/ports"
  echo "$iceberg"
  ;;
status)
  if running; then echo "seaweedfs: running in $dir"; exit 0; fi
  echo "seaweedfs: not running in $dir"; exit 3
  ;;
*) echo "usage: $0 start <dir> [--owner <pid>] | stop <dir> | kill <dir> | status <dir> | iceberg-port <dir>" >&2; exit 2 ;;
esac
