#!/usr/bin/env bash
# Fetches the Elasticsearch sink's two test servers from Maven Central and unpacks each ONCE per
# machine into a cache outside the clone (scripts/setup.sh runs this; idempotent):
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/opensearch-2.19.6      (Apache-2.0)
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/elasticsearch-7.10.2   (the last Apache-2.0 release)
# Both are the complete "integ-test-zip" nodes (transport module only: no security, no painless),
# enough for index / _bulk / search. OpenSearch gets one more module from Maven Central, so ingest
# pipelines have processors (set, lowercase, ...): ingest-common 2.19.6 with its jars (grok, dissect,
# joni, jcodings) under modules/ingest-common, with the plugin descriptor the distribution would
# carry (Maven Central's jar has none). Elasticsearch 7.10.2's ingest-common is not on Maven
# Central: its pipelines are not tested. A cache dir is complete once its .complete marker exists; a
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

# OpenSearch's ingest-common module into an unpacked node (idempotent: a marker in the module dir).
add_ingest_common() {  # <install dir> <version>
  local install="$1" version="$2"
  local module="$install/modules/ingest-common"
  [[ -f "$module/.complete" ]] && return 0
  echo "setup: adding the ingest-common $version module from Maven Central to $install"
  mvn -q -B dependency:get -Dartifact="org.opensearch.plugin:ingest-common:$version:jar"
  local repo="$HOME/.m2/repository" jars=()
  jars=("$repo/org/opensearch/plugin/ingest-common/$version/ingest-common-$version.jar"
        "$repo/org/opensearch/opensearch-grok/$version/opensearch-grok-$version.jar"
        "$repo/org/opensearch/opensearch-dissect/$version/opensearch-dissect-$version.jar")
  # grok's regular expressions: joni and jcodings, the versions its pom names.
  local pom="$repo/org/opensearch/opensearch-grok/$version/opensearch-grok-$version.pom" dep v
  for dep in joni jcodings; do
    v="$(sed -n "/<artifactId>$dep<\/artifactId>/{n;s/.*<version>\(.*\)<\/version>.*/\1/p}" "$pom")"
    [[ -n "$v" ]] || { echo "setup: no $dep version in $pom" >&2; exit 1; }
    jars+=("$repo/org/jruby/$dep/$dep/$v/$dep-$v.jar")
  done
  rm -rf "$module"
  mkdir -p "$module"
  cp "${jars[@]}" "$module/"
  cat > "$module/plugin-descriptor.properties" <<EOF2
description=Module for ingest processors that do not require additional security permissions or have large dependencies and resources
version=$version
name=ingest-common
classname=org.opensearch.ingest.common.IngestCommonPlugin
java.version=11
opensearch.version=$version
custom.foldername=
extended.plugins=
has.native.controller=false
EOF2
  chmod -R a+rX "$module"
  touch "$module/.complete"
}

fetch opensearch org.opensearch.distribution.integ-test-zip opensearch 2.19.6
add_ingest_common "$cache/opensearch-2.19.6" 2.19.6
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
