#!/usr/bin/env bash
# Builds FerretDB v1.24.2 (MongoDB wire protocol on PostgreSQL; the MongoDB sink's test server)
# once per machine into a cache outside the clone:
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/ferretdb-1.24.2/ferretdb
# Prints that path. Already built: only checks it runs.
# Why not `go install ...@v1.24.2`: that build has an empty build/version/version.txt and panics
# at start. So: download the module from the Go module proxy, copy it (the module cache is
# read-only), write version.txt, build ./cmd/ferretdb.
set -euo pipefail
version=v1.24.2
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/ferretdb-${version#v}"
bin="$cache/ferretdb"
if [[ -x "$bin" ]] && "$bin" --version >/dev/null 2>&1; then echo "$bin"; exit 0; fi
# The Go toolchain of these machines is /usr/local/go (Debian's golang is too old for FerretDB 1.24).
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-ferretdb: no Go toolchain (go, Go >= 1.22) on PATH or in /usr/local/go/bin" >&2; exit 1; }
mkdir -p "$cache"
# One build at a time per machine (clones and worktrees set up side by side): wait, then re-check.
exec 9>"$cache/.build.lock"
flock 9
if [[ -x "$bin" ]] && "$bin" --version >/dev/null 2>&1; then echo "$bin"; exit 0; fi
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOPATH="$work/gopath" GOFLAGS=-mod=mod GOTOOLCHAIN=local
dir="$(cd "$work" && go mod download -json "github.com/FerretDB/FerretDB@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$dir" ]] || { echo "build-ferretdb: go mod download gave no module dir" >&2; exit 1; }
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
echo "$version" > "$work/src/build/version/version.txt"
echo "build-ferretdb: building FerretDB $version into $cache (a few minutes, once per machine)" >&2
(cd "$work/src" && go build -trimpath -ldflags "-s -w" -o "$bin.tmp" ./cmd/ferretdb) >&2
mv "$bin.tmp" "$bin"
"$bin" --version >/dev/null
echo "$bin"
