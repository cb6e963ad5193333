#!/usr/bin/env bash
# The InfluxDB sink's two test servers:
#   v1 API: Debian 12's influxdb package, InfluxDB 1.6.7 (/usr/bin/influxd; scripts/setup.sh installs it)
#   v2 API: ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/influxdb-2.8.0/influxd, built once per
#           machine from the Go module proxy into a cache outside the clone.
# 2.8.0 links libflux, which cargo builds; influxdata's pkg-config wrapper drives that build and
# needs RUSTUP_TOOLCHAIN=stable. flux 0.196 (in 2.8.0) denies warnings that current rustc raises,
# so the build runs rustc through a wrapper that adds --cap-lints warn to crate builds; it runs
# inside a writable copy of its module. Measured on 2 cores under load 10-16 (2026-12-02, nice'd,
# first time on the machine): 663 s (module downloads and libflux's cargo build included; a second
# build with the Go and cargo caches warm took 269 s). Binary: ~130 MB. The v1 server was a
# 1.13.2 build too (712 s more on a fresh machine); Debian's 1.6.7 speaks the same v1 write and
# query API and gives the same answers the sink's tests assert.
# Usage: build-influxdb.sh [1|2]   (default: both). Prints the binaries' paths. Idempotent.
set -euo pipefail
cache_root="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
which_ones="${1:-both}"

need_go() {
  command -v go >/dev/null || { echo "influxdb: go is not installed (needed once to build the test servers)" >&2; exit 1; }
  command -v cargo >/dev/null || { echo "influxdb: cargo is not installed (libflux is Rust)" >&2; exit 1; }
}

# influxdata's pkg-config wrapper (builds libflux on demand), installed into $1.
tools_for() {
  local tools="$1"
  mkdir -p "$tools"
  if [[ ! -x "$tools/pkg-config" ]]; then
    GOBIN="$tools" go install github.com/influxdata/pkg-config@v0.2.14 >&2
  fi
  cat >"$tools/rustc-cap-lints" <<'WRAP'
#!/bin/sh
# RUSTC_WRAPPER: cargo calls "$0 rustc ARGS..."; crate builds get --cap-lints warn.
rustc="$1"; shift
case " $* " in *" --crate-name "*) exec "$rustc" "$@" --cap-lints warn ;; esac
exec "$rustc" "$@"
WRAP
  chmod +x "$tools/rustc-cap-lints"
}

build_v1() {
  local bin=/usr/bin/influxd
  if [[ -x "$bin" ]] && "$bin" version 2>/dev/null | grep -q '^InfluxDB v1\.'; then echo "$bin"; return; fi
  echo "influxdb: $bin (Debian's influxdb package, InfluxDB 1.x) is missing: run scripts/setup.sh" >&2
  exit 1
}

build_v2() {
  local version=2.8.0 dir="$cache_root/influxdb-2.8.0"
  if [[ -x "$dir/influxd" ]] && "$dir/influxd" version >/dev/null 2>&1; then echo "$dir/influxd"; return; fi
  need_go
  mkdir -p "$dir"
  # One build at a time (scripts/test.sh builds in the background while ctest's test_server_* fixture waits).
  exec 9>"$dir/.build.lock"
  flock 9
  if [[ -x "$dir/influxd" ]] && "$dir/influxd" version >/dev/null 2>&1; then echo "$dir/influxd"; return; fi
  local work; work="$(mktemp -d "$dir/build.XXXXXX")"
  tools_for "$work/tools"
  echo "influxdb: building influxd $version into $dir (once per machine, several minutes)" >&2
  local start=$SECONDS
  local src
  src="$(go mod download -json "github.com/influxdata/influxdb/v2@v$version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  cp -r "$src" "$work/src"
  chmod -R u+w "$work/src"
  # libflux's release profile is fat LTO at opt-level z, most of a new machine's ~30 min for this
  # server; a test server's parser does not need it: level 1, no LTO (cargo's profile overrides).
  (cd "$work/src" && PKG_CONFIG="$work/tools/pkg-config" RUSTUP_TOOLCHAIN=stable \
     RUSTC_WRAPPER="$work/tools/rustc-cap-lints" CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
     nice -n 10 go build -ldflags "-s -w -X main.version=$version" -o "$work/influxd" ./cmd/influxd) >&2
  "$work/influxd" version >/dev/null
  mv "$work/influxd" "$dir/influxd"
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
  echo "influxdb: influxd $version built in $((SECONDS - start)) s" >&2
  echo "$dir/influxd"
}

case "$which_ones" in
  1) build_v1 ;;
  2) build_v2 ;;
  both) build_v1; build_v2 ;;
  *) echo "usage: $0 [1|2]" >&2; exit 2 ;;
esac
