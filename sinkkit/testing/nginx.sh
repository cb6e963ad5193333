#!/usr/bin/env bash
# Starts / stops a throwaway nginx (Debian's nginx-light) for the tests and benchmarks of HTTP sinks.
#   nginx.sh start  <dir> [--tls] [--proxy-to <url>] [--authorization <value>]... [--owner <pid>]
#       writes a config into <dir> (pid file, logs and temp paths there too: nothing under /var or
#       /run), starts nginx as one non-daemon process on a free 127.0.0.1 port, waits until it
#       answers, and prints that port alone on stdout. It answers 204 to POST and PUT on any path
#       and 405 to other methods; /mtls/... answers 204 only to a client certificate of the test
#       CA (403 otherwise); /_status is stub_status (connections accepted, requests); /capture/...
#       answers 204 too, and keeps each request body as a file under <dir>/tmp/body (benchmarks
#       replay exactly what a sink sent). access.log has one line per request: method, path,
#       status, request length and the Idempotency-Key header.
#       --tls: HTTPS with HTTP/2 offered through ALPN; openssl generates into <dir> a CA (ca.pem),
#       a server certificate for 127.0.0.1 and localhost, and a client certificate (client.pem,
#       client.key encrypted with the password "picomq-test-client-key").
#       --proxy-to: paths outside the ones above are not answered 204 but passed to that upstream
#       (any method, bodies streamed, keep-alive upstream): a TLS front for a plain-HTTP test server.
#       --authorization: those paths then need an Authorization header equal to one of these values
#       (e.g. "Basic <base64 of user:password>", "ApiKey <key>"), else 401 with WWW-Authenticate and
#       an Elasticsearch-style security_exception body; the header is passed on unchanged.
#       --owner: a watchdog stops nginx when that process is gone (a crashed test leaves nothing).
#   nginx.sh stop   <dir>   graceful stop (SIGQUIT, then SIGTERM, then SIGKILL); idempotent
#   nginx.sh status <dir>   exit 0 when running, 3 when not
set -euo pipefail
nginx_bin="${NGINX:-/usr/sbin/nginx}"
client_key_password="picomq-test-client-key"
cmd="${1:?start|stop|status}"; dir="${2:?dir}"
dir="$(realpath -m "$dir")"
shift 2
# start_watchdog / stop_watchdog: beside this script, in the tree and installed.
source "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/server-watchdog.sh"

fail() {
  echo "nginx: $*" >&2
  if [[ -f "$dir/error.log" ]]; then echo "nginx: last lines of $dir/error.log:" >&2; tail -20 "$dir/error.log" >&2; fi
  exit 1
}

running() { [[ -f "$dir/nginx.pid" ]] && kill -0 "$(cat "$dir/nginx.pid")" 2>/dev/null; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

make_certificates() {
  local ssl=(openssl)
  cd "$dir"
  "${ssl[@]}" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
    -days 2 -subj "/CN=picomq test CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>>openssl.log
  "${ssl[@]}" req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr \
    -subj "/CN=127.0.0.1" 2>>openssl.log
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > server.ext
  "${ssl[@]}" x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
    -extfile server.ext 2>>openssl.log
  "${ssl[@]}" genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -aes256 \
    -pass "pass:$client_key_password" -out client.key 2>>openssl.log
  "${ssl[@]}" req -new -key client.key -passin "pass:$client_key_password" -subj "/CN=picomq test client" \
    -out client.csr 2>>openssl.log
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' > client.ext
  "${ssl[@]}" x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 \
    -extfile client.ext 2>>openssl.log
  cd - >/dev/null
}

write_config() {
  local port="$1" tls="$2" listen tls_lines="" auth_map="" auth_check="" main_location v
  if ((${#authorizations[@]})); then
    auth_map="map \$http_authorization \$picomq_authorized {
    default 0;"
    for v in "${authorizations[@]}"; do auth_map+="
    \"$v\" 1;"; done
    auth_map+="
  }"
    auth_check="if (\$picomq_authorized = 0) {
        add_header WWW-Authenticate 'Basic realm=\"picomq test\"' always;
        return 401 '{\"error\":{\"type\":\"security_exception\",\"reason\":\"missing or wrong credentials (picomq test proxy)\"},\"status\":401}';
      }"
  fi
  if [[ -n "$proxy_to" ]]; then
    main_location="location / {
      default_type application/json;  # of the 401's body
      $auth_check
      proxy_pass $proxy_to;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_request_buffering off;
      proxy_read_timeout 300s;
    }"
  else
    main_location="location / {
      $auth_check
      if (\$request_method !~ ^(POST|PUT)\$) { return 405; }
      return 204;
    }"
  fi
  if [[ "$tls" == 1 ]]; then
    listen="listen 127.0.0.1:$port ssl http2;"
    tls_lines="ssl_certificate $dir/server.pem;
    ssl_certificate_key $dir/server.key;
    ssl_client_certificate $dir/ca.pem;
    ssl_verify_client optional;"
  else
    listen="listen 127.0.0.1:$port;"
  fi
  mkdir -p "$dir/tmp"
  cat > "$dir/nginx.conf" <<CONF
# sinkkit/testing/nginx.sh: one process, in the foreground, everything under $dir.
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  log_format requests '\$request_method \$uri \$status \$request_length \$http_idempotency_key';
  access_log $dir/access.log requests;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  client_max_body_size 0;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  $auth_map
  server {
    $listen
    $tls_lines
    location = /_status { stub_status; }
    location /capture/ {
      client_body_in_file_only on;  # the body stays in client_body_temp_path
      client_body_buffer_size 16m;
      proxy_pass http://127.0.0.1:$port/captured;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
    }
    location = /captured { return 204; }
    location /mtls/ {
      if (\$ssl_client_verify != SUCCESS) { return 403; }
      if (\$request_method !~ ^(POST|PUT)\$) { return 405; }
      return 204;
    }
    $main_location
  }
}
CONF
}

answers() {
  local port="$1" tls="$2"
  if [[ "$tls" == 1 ]]; then
    curl -sf -o /dev/null --max-time 2 --cacert "$dir/ca.pem" "https://127.0.0.1:$port/_status"
  else
    curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/_status"
  fi
}

stop_server() { stop_pid "$dir/nginx.pid" 5 QUIT TERM KILL || fail "could not stop nginx (pid $(cat "$dir/nginx.pid"))"; }

case "$cmd" in
start)
  tls=0; owner=""; proxy_to=""; authorizations=()
  while (($#)); do
    case "$1" in
      --tls) tls=1; shift ;;
      --proxy-to) proxy_to="${2:?--proxy-to needs a url}"; shift 2 ;;
      --authorization)
        v="${2:?--authorization needs a value}"
        [[ "$v" =~ [\"\\\$\;\{\}] ]] && { echo "nginx: --authorization value with a quote, backslash, \$, ; or brace: not supported" >&2; exit 2; }
        authorizations+=("$v"); shift 2 ;;
      --owner) owner="${2:?--owner needs a pid}"; shift 2 ;;
      *) echo "nginx: unknown option $1" >&2; exit 2 ;;
    esac
  done
  [[ -x "$nginx_bin" ]] || { echo "nginx: $nginx_bin missing: run scripts/setup.sh (nginx-light)" >&2; exit 1; }
  mkdir -p "$dir"
  running && fail "already running in $dir"
  [[ "$tls" == 1 ]] && { make_certificates || fail "openssl failed (see $dir/openssl.log)"; }
  # The port is free when chosen and taken by nginx a moment later: another process can win
  # that race, so try a few.
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    write_config "$port" "$tls"
    : > "$dir/error.log"
    "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" </dev/null >>"$dir/stdout.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do
      if answers "$port" "$tls"; then
        echo "$pid" > "$dir/nginx.pid"  # nginx writes it too; this one exists as soon as it answers
        break 2
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "nginx: attempt $attempt on port $port failed" >&2
    [[ "$attempt" == 5 ]] && fail "did not start"
  done
  if [[ -n "$owner" ]]; then start_watchdog nginx-watchdog "$owner" "${BASH_SOURCE[0]}"; fi
  echo "$port"
  ;;
stop)
  [[ -d "$dir" ]] || exit 0
  stop_server
  stop_watchdog
  ;;
status)
  if running; then echo "nginx: running in $dir"; exit 0; fi
  echo "nginx: not running in $dir"; exit 3
  ;;
*) echo "usage: $0 start <dir> [--tls] [--proxy-to <url>] [--authorization <value>]... [--owner <pid>] | stop <dir> | status <dir>" >&2; exit 2 ;;
esac
