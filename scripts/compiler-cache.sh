# shellcheck shell=bash
# Sourced by build.sh and sanitize.sh: compile through ccache when it is installed (setup.sh
# installs it), with the cache outside the clone (~/.cache/ccache), so a machine that built this
# tree once rebuilds a fresh clone in minutes, not a quarter of an hour. Paths are taken
# relative to the clone (CCACHE_BASEDIR, CCACHE_NOHASHDIR): clones in other folders share the
# cache. Sets compiler_launcher=( cmake arguments ), empty without ccache.
compiler_launcher=()
if command -v ccache >/dev/null 2>&1; then
  # The clone's root: the caller's $here, or this script's parent folder when sourced by hand
  # (an empty base dir would hash absolute paths, and a build by hand would warm no clone).
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-${here:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  compiler_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
