# Sourced by the start / stop scripts of throwaway test servers (nginx.sh beside it,
# sinks/<name>/server.sh): a watchdog that stops the server once the process that started it
# is gone, so a crashed test leaves no server behind, and stop_pid, the stop they share.
# Installed with nginx.sh
# (share/picomq-sdk/testing/), so a sink's own server script outside the tree can source it too.
#
# The calling script keeps its state in "$dir" (watchdog.pid and watchdog.log go there) and
# stops its server with `bash <script> stop <dir>`:
#   start) ... if [[ -n "$owner" ]]; then start_watchdog <name> "$owner" "${BASH_SOURCE[0]}"; fi ;;
#   stop)  stop_server; stop_watchdog ;;

# Detached (own session, own stdio): polls <owner-pid> every second and, once it is gone, runs
# `bash <script> stop "$dir"`. Replaces a watchdog already running for "$dir". <name> is its
# process name in ps (e.g. nginx-watchdog).
start_watchdog() {
  local name="$1" owner="$2" script
  script="$(realpath "$3")"
  stop_watchdog
  # bash <script>: an installed copy may lack the executable bit.
  setsid nohup bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; bash "$2" stop "$3"' \
    "$name" "$owner" "$script" "$dir" </dev/null >>"$dir/watchdog.log" 2>&1 &
  echo $! > "$dir/watchdog.pid"
}

# Ends the watchdog of "$dir", if any. Run by the watchdog itself (its `stop` is this script's
# child): only forgets its pid file, since the watchdog exits right after.
stop_watchdog() {
  [[ -f "$dir/watchdog.pid" ]] || return 0
  local watchdog
  watchdog="$(cat "$dir/watchdog.pid" 2>/dev/null || true)"
  if [[ -n "$watchdog" && "$watchdog" != "$$" && "$watchdog" != "$PPID" ]]; then
    kill "$watchdog" 2>/dev/null || true
  fi
  rm -f "$dir/watchdog.pid"
}

# Stops the process in <pid file>: each signal in turn, waiting up to <seconds> after each for it
# to exit; the pid file goes once it has (or when nothing runs). 1 if it outlived every signal.
#   stop_pid "$dir/nginx.pid" 5 QUIT TERM KILL || fail "could not stop nginx"
stop_pid() {
  local file="$1" seconds="$2" pid sig _
  shift 2
  pid="$(cat "$file" 2>/dev/null || true)"
  if [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$file"
    return 0
  fi
  for sig in "$@"; do
    kill "-$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((seconds * 20))); do
      if ! kill -0 "$pid" 2>/dev/null; then
        rm -f "$file"
        return 0
      fi
      sleep 0.05
    done
  done
  return 1
}
