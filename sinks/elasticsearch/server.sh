#!/usr/bin/env bash
# Starts / stops a throwaway OpenSearch or Elasticsearch node for the tests, from the machine's
# server cache (fetch-servers.sh, run by scripts/setup.sh), of the version PICOMQ_OPENSEARCH_VERSION
# (3.6, the default, what CI runs: 3.6.0 on Java 21+, PICOMQ_JAVA21_HOME, default the Temurin 25
# JDK; or 2.19: 2.19.6) / PICOMQ_ELASTICSEARCH_VERSION (8.19, the default: 8.19.21 with
# xpack.security.enabled false; or 7.10: 7.10.2) names; `bash scripts/matrix.sh` runs both of each.
#   server.sh start  <dir> opensearch|elasticsearch [--owner <pid>] [--setting key=value]...
#       first time: a config directory of its own under <dir> (the cached install is never
#       written), data, logs and tmp under <dir>; single-node discovery, 127.0.0.1 only, two free
#       ports (HTTP and transport), heap 512 MB (PICOMQ_SEARCH_HEAP), each --setting appended to
#       the node's yml (e.g. thread_pool.write.queue_size=2). Runs the node as one process
#       (not a daemon) as the system user picomq-search when started as root (both refuse to run
#       as root), waits until the cluster is at least yellow and prints the HTTP port alone on
#       stdout. Again after stop: the same data, ports and settings (an outage, not a new node).
#       --owner: a watchdog stops the node once that process is gone.
#   server.sh stop   <dir>   SIGTERM, then SIGKILL after 15 s; idempotent
#   server.sh kill   <dir>   SIGKILL at once (a crash of the node)
#   server.sh status <dir>   exit 0 when running, 3 when not
set -euo pipefail
cmd="${1:?start|stop|kill|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
source "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/../../sinkkit/testing/server-watchdog.sh"
shift 2
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
user="${PICOMQ_SEARCH_USER:-picomq-search}"
heap="${PICOMQ_SEARCH_HEAP:-512m}"

fail() {
  echo "search server: $*" >&2
  for f in "$dir/stdout.log"; do
    if [[ -s "$f" ]]; then echo "search server: last lines of $f:" >&2; tail -30 "$f" >&2; fi
  done
  exit 1
}

running() { [[ -f "$dir/server.pid" ]] && kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# <flavor> <install dir> <yml name> <http port> <transport port> <settings...>
write_config() {
  local flavor="$1" install="$2" yml="$3" http_port="$4" transport_port="$5"
  shift 5
  rm -rf "$dir/config" "$dir/data" "$dir/logs" "$dir/tmp"
  mkdir -p "$dir/data" "$dir/logs" "$dir/tmp"
  cp -r "$install/config" "$dir/config"
  # The launcher cds into the install: the JVM options' relative paths (GC log, heap dumps,
  # error files) would point into the cache. Into <dir> instead; GC logging off.
  sed -i -e "s|HeapDumpPath=data|HeapDumpPath=$dir/data|" -e "s|ErrorFile=logs/|ErrorFile=$dir/logs/|" \
    -e '/-Xlog:gc/d' -e '/-Xloggc/d' "$dir/config/jvm.options"
  {
    echo "# sinks/elasticsearch/server.sh"
    echo "cluster.name: picomq-test"
    echo "node.name: picomq-test-node"
    echo "discovery.type: single-node"
    echo "network.host: 127.0.0.1"
    echo "http.port: $http_port"
    echo "transport.port: $transport_port"
    echo "path.data: $dir/data"
    echo "path.logs: $dir/logs"
    # A test machine's disk is often fuller than the default watermarks allow (85%): shards
    # would stay unassigned and writes fail for a reason that is not the sink's.
    echo "cluster.routing.allocation.disk.threshold_enabled: false"
    echo "action.auto_create_index: true"
    # Elasticsearch 8 turns security (TLS and passwords) on by default: the tests' node is plain
    # HTTP without users, as 7.10's was (the sink's TLS and credentials are tested through nginx).
    if [[ "$install" == */elasticsearch-8.* ]]; then echo "xpack.security.enabled: false"; fi
    for s in "$@"; do echo "${s%%=*}: ${s#*=}"; done
  } >> "$dir/config/$yml"
  echo "$flavor" > "$dir/flavor"
  echo "$install" > "$dir/install"
  echo "$http_port" > "$dir/http_port"
  printf '%s\n' "$@" > "$dir/settings"
  if [[ "$(id -u)" == 0 ]]; then
    id -u "$user" >/dev/null 2>&1 || fail "user $user missing: run scripts/setup.sh (sinks/elasticsearch/fetch-servers.sh)"
    chown -R "$user:" "$dir"
  fi
}

# Up when the cluster health is yellow or green (the node answers and has elected itself).
answers() {
  curl -sf --max-time 2 "http://127.0.0.1:$1/_cluster/health?wait_for_status=yellow&timeout=1s" 2>/dev/null |
    grep -q '"status":"\(yellow\|green\)"'
}

stop_server() {  # <signal>...
  stop_pid "$dir/server.pid" 15 "$@" || fail "could not stop the node (pid $(cat "$dir/server.pid"))"
}

# Starts the configured node; 0 once it answers, 1 if it died or did not answer in 90 s.
launch() {
  local flavor port pid install java_home
  flavor="$(cat "$dir/flavor")"
  port="$(cat "$dir/http_port")"
  install="$(cat "$dir/install")"
  java_home="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
  # OpenSearch 3 needs Java 21 or newer (Debian 12 has 17).
  if [[ "$install" == */opensearch-3.* ]]; then
    java_home="${PICOMQ_JAVA21_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
    [[ -x "$java_home/bin/java" ]] ||
      fail "OpenSearch 3 needs Java 21+: no $java_home/bin/java (set PICOMQ_JAVA21_HOME, or PICOMQ_OPENSEARCH_VERSION=2.19)"
  fi
  local -a env=(HOME="$dir" JAVA_HOME="$java_home" PATH="/usr/bin:/bin")
  if [[ "$flavor" == opensearch ]]; then
    env+=(OPENSEARCH_PATH_CONF="$dir/config" OPENSEARCH_TMPDIR="$dir/tmp"
          OPENSEARCH_JAVA_OPTS="-Xms$heap -Xmx$heap -XX:TieredStopAtLevel=1")
    bin="$install/bin/opensearch"
  else
    # ES_JAVA_HOME: Elasticsearch 8 reads it (it ignores JAVA_HOME for the JDK it would bundle).
    env+=(ES_PATH_CONF="$dir/config" ES_TMPDIR="$dir/tmp" ES_JAVA_HOME="$java_home"
          ES_JAVA_OPTS="-Xms$heap -Xmx$heap -XX:TieredStopAtLevel=1")
    bin="$install/bin/elasticsearch"
  fi
  local -a as_user=()
  if [[ "$(id -u)" == 0 ]]; then as_user=(setpriv --reuid="$user" --regid="$user" --init-groups); fi
  : > "$dir/stdout.log"
  # The launcher script execs java, so $! is the node itself.
  (cd "$dir" && exec "${as_user[@]}" env -i "${env[@]}" "$bin") </dev/null >>"$dir/stdout.log" 2>&1 &
  pid=$!
  echo "$pid" > "$dir/server.pid"
  for _ in $(seq 1 900); do
    if answers "$port"; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$dir/server.pid"
  return 1
}

install_dir() {
  local version
  case "$1" in
    opensearch)
      version="${PICOMQ_OPENSEARCH_VERSION:-3.6}"
      case "$version" in
        3.6 | 3.6.0) echo "$cache/opensearch-3.6.0" ;;
        2.19 | 2.19.6) echo "$cache/opensearch-2.19.6" ;;
        *) echo "search server: PICOMQ_OPENSEARCH_VERSION=$version: 3.6 or 2.19" >&2; exit 2 ;;
      esac ;;
    elasticsearch)
      version="${PICOMQ_ELASTICSEARCH_VERSION:-8.19}"
      case "$version" in
        8.19 | 8.19.21) echo "$cache/elasticsearch-8.19.21" ;;
        7.10 | 7.10.2) echo "$cache/elasticsearch-7.10.2" ;;
        *) echo "search server: PICOMQ_ELASTICSEARCH_VERSION=$version: 8.19 or 7.10" >&2; exit 2 ;;
      esac ;;
    *) echo "search server: unknown flavor '$1' (opensearch or elasticsearch)" >&2; exit 2 ;;
  esac
}

case "$cmd" in
start)
  flavor="${1:?start <dir> opensearch|elasticsearch}"; shift
  install="$(install_dir "$flavor")"
  yml="opensearch.yml"; [[ "$flavor" == elasticsearch ]] && yml="elasticsearch.yml"
  owner=""; settings=()
  while (($#)); do
    case "$1" in
      --owner) owner="${2:?--owner needs a pid}"; shift 2 ;;
      --setting) settings+=("${2:?--setting needs key=value}"); shift 2 ;;
      *) echo "search server: unknown option $1" >&2; exit 2 ;;
    esac
  done
  [[ -f "$install/.complete" ]] || fail "$install missing: run scripts/setup.sh (sinks/elasticsearch/fetch-servers.sh)"
  mkdir -p "$dir"
  if running; then
    echo "search server: already running in $dir" >&2
  elif [[ -f "$dir/http_port" ]]; then
    launch || fail "$flavor did not start again on 127.0.0.1:$(cat "$dir/http_port")"
  else
    # A port is free when chosen and taken by the node a moment later: another process can win
    # that race, so try a few.
    for attempt in 1 2 3; do
      write_config "$flavor" "$install" "$yml" "$(free_port)" "$(free_port)" "${settings[@]}"
      launch && break
      echo "search server: attempt $attempt on port $(cat "$dir/http_port") failed" >&2
      [[ "$attempt" == 3 ]] && fail "$flavor did not start"
    done
  fi
  if [[ -n "$owner" ]]; then start_watchdog search-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  cat "$dir/http_port"
  ;;
stop|kill)
  [[ -d "$dir" ]] || exit 0
  if [[ "$cmd" == kill ]]; then stop_server KILL; else stop_server TERM KILL; fi
  if [[ "$cmd" == stop ]]; then stop_watchdog; fi
  ;;
status)
  if running; then echo "search server: running in $dir"; exit 0; fi
  echo "search server: not running in $dir"; exit 3
  ;;
*) echo "usage: $0 start <dir> opensearch|elasticsearch [--owner <pid>] [--setting k=v]... | stop|kill|status <dir>" >&2; exit 2 ;;
esac
