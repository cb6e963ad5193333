#!/usr/bin/env bash
# Helm (helm.sh/helm/v4, from the Go module proxy) for the chart's tests (deploy/helm,
# tests/packaging): built once per machine into ${PICOMQ_SERVER_CACHE:-~/.cache/picomq/servers}/helm-<version>/
# (~4 min and ~400 MB of modules on a fresh machine; seconds after). Prints the binary's path.
set -euo pipefail
version=v4.3.2
cache="${PICOMQ_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picomq/servers}/helm-$version"
bin="$cache/helm"
if [[ ! -x "$bin" ]]; then
  command -v go >/dev/null || { echo "fetch-helm: needs Go (/usr/local/go/bin/go on these machines)" >&2; exit 1; }
  mkdir -p "$cache"
  # One build at a time (scripts/test.sh builds in the background while ctest's test_server_* fixture waits).
  exec 9>"$cache/.build.lock"
  flock 9
fi
if [[ ! -x "$bin" ]]; then
  # The version is pinned here and in go.sum of the module proxy's answer (GOFLAGS=-mod=mod, GONOSUMDB unset:
  # sums are checked against sum.golang.org's records cached by the proxy).
  GOBIN="$cache.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
    "helm.sh/helm/v4/cmd/helm@$version" >&2
  mv "$cache.tmp/helm" "$bin"
  rmdir "$cache.tmp"
fi
echo "$bin"
