#!/usr/bin/env bash
# Fetches the Elasticsearch sink's two test servers from Maven Central and unpacks each ONCE per
# machine into a cache outside the clone (scripts/setup.sh runs this; idempotent):
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/opensearch-2.19.6      (Apache-2.0)
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/elasticsearch-7.10.2   (the last Apache-2.0 release)
# Both are the complete "integ-test-zip" nodes (transport module only: no security, no painless),
# enough for index / _bulk / search. A cache dir is complete once its .complete marker exists; a
# half-unpacked one is replaced. Run as root, it also creates the system user the servers run as
# (they refuse to run as root): picomq-search (PICOMQ_SEARCH_USER), no login, no home.
set -euo pipefail
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
user="${PICOMQ_SEARCH_USER:-picomq-search}"

fetch() {  # <name> <maven group> <artifact> <version>
  local name="$1" group="$2" artifact="$3" version="$4"
  local dest="$cache/$name-$version"
  [[ -f "$dest/.complete" ]] && return 0
  echo "setup: fetching $name $version from Maven Central into $dest"
  mvn -q -B dependency:get -Dartifact="$group:$artifact:$version:zip" -Dtransitive=false
  local zip="$HOME/.m2/repository/${group//.//}/$artifact/$version/$artifact-$version.zip"
  [[ -f "$zip" ]] || { echo "setup: $zip missing after mvn dependency:get" >&2; exit 1; }
  mkdir -p "$cache"
  local tmp
  tmp="$(mktemp -d "$cache/.$name-$version.XXXXXX")"
  unzip -q "$zip" -d "$tmp"
  rm -rf "$dest"
  mv "$tmp/$name-$version" "$dest"
  rmdir "$tmp"
  # Read and run by the server user: the tree stays owned by whoever set up, the servers write
  # only into their run directories (path.data, path.logs, a copied config dir).
  chmod -R a+rX "$dest"
  touch "$dest/.complete"
}

fetch opensearch org.opensearch.distribution.integ-test-zip opensearch 2.19.6
fetch elasticsearch org.elasticsearch.distribution.integ-test-zip elasticsearch 7.10.2

if [[ "$(id -u)" == 0 ]] && ! id -u "$user" >/dev/null 2>&1; then
  echo "setup: creating system user $user (OpenSearch and Elasticsearch refuse to run as root)"
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
fi
# The cache's parents must be traversable by that user (a home directory often is not).
if [[ "$(id -u)" == 0 ]]; then
  d="$cache"
  while [[ "$d" != / ]]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
fi
