# shellcheck shell=bash
# The CI clock: sourced by .ci/run, test.sh, setup.sh, build.sh and build-test-servers.sh. Every
# phase run through `clock <name> <command...>` prints its start and end with the duration, and,
# when PICOMQ_CLOCK_FILE names a file (.ci/run sets it), appends one line to it:
#   <name> TAB <start, epoch s> TAB <end, epoch s> TAB <seconds> TAB <exit code>
# so that .ci/run ends with a table of every phase (scripts/clock_report.py). Phases may nest
# (setup inside test.sh) and run side by side (the test servers beside the build). Outside CI the
# lines print and nothing is kept. A phase's name is prefixed with the phases it runs inside
# ("test.sh/setup/apt"): the report tells nested phases from side-by-side ones by that.
# Run a script or a program through it, not a shell function: `||` would turn off `set -e`
# inside a function.
clock() {
  local name="${PICOMQ_CLOCK_PREFIX:-}$1"
  shift
  local start end rc=0
  start=$(date +%s)
  echo "[clock] $(date +%T) start $name" >&2
  PICOMQ_CLOCK_PREFIX="$name/" "$@" || rc=$?
  end=$(date +%s)
  echo "[clock] $(date +%T) end   $name: $((end - start)) s$( ((rc)) && echo " (exit $rc)")" >&2
  if [[ -n "${PICOMQ_CLOCK_FILE:-}" ]]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$start" "$end" "$((end - start))" "$rc" >>"$PICOMQ_CLOCK_FILE"
  fi
  return "$rc"
}

# The same around a block of the script itself (where `clock` cannot wrap a command):
#   clock_begin apt; ...; clock_end apt
declare -gA _clock_started
clock_begin() {
  _clock_started[$1]=$(date +%s)
  echo "[clock] $(date +%T) start ${PICOMQ_CLOCK_PREFIX:-}$1" >&2
}
clock_end() {
  local name="${PICOMQ_CLOCK_PREFIX:-}$1" start=${_clock_started[$1]} end
  end=$(date +%s)
  echo "[clock] $(date +%T) end   $name: $((end - start)) s" >&2
  if [[ -n "${PICOMQ_CLOCK_FILE:-}" ]]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$start" "$end" "$((end - start))" 0 >>"$PICOMQ_CLOCK_FILE"
  fi
}
