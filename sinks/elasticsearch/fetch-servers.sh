#!/usr/bin/env bash
# Fetches the Elasticsearch sink's test servers from Maven Central and unpacks each ONCE per
# machine into a cache outside the clone (scripts/setup.sh runs this; idempotent):
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/opensearch-3.6.0       (Apache-2.0; Java 21+)
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/elasticsearch-8.19.21  (x-pack core and security)
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/opensearch-2.19.6      (Apache-2.0)
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/elasticsearch-7.10.2   (the last Apache-2.0 release)
#   fetch-servers.sh               the newest of each (what CI runs) and, unless --newest, the oldest
#   fetch-servers.sh --newest      OpenSearch 3.6.0 and Elasticsearch 8.19.21 only
#   fetch-servers.sh --oldest      OpenSearch 2.19.6 and Elasticsearch 7.10.2 only
# (server.sh picks one of each by PICOMQ_OPENSEARCH_VERSION / PICOMQ_ELASTICSEARCH_VERSION.)
# All are the complete "integ-test-zip" nodes, enough for index / _bulk / search. OpenSearch 3.6's
# carries its modules (ingest-common among them); OpenSearch 2.19.6's has the transport module
# only and gets one more from Maven Central, so ingest pipelines have processors (set, lowercase,
# ...): ingest-common 2.19.6 with its jars (grok, dissect, joni, jcodings) under
# modules/ingest-common, with the plugin descriptor the distribution would carry (Maven Central's
# jar has none). Elasticsearch 7.10.2's ingest-common is not on Maven Central, nor 8.19's
# data-streams and ingest modules: their pipelines and data streams are not tested on a real node.
# A cache dir is complete once its .complete marker exists; a half-unpacked one is replaced. Run
# as root, it also creates the system user the servers run as (they refuse to run as root):
# picomq-search (PICOMQ_SEARCH_USER), no login, no home.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
which="${1:-}"
case "$which" in
  "" | --newest | --oldest) ;;
  *) echo "usage: fetch-servers.sh [--newest | --oldest]" >&2; exit 2 ;;
esac
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
user="${PICOMQ_SEARCH_USER:-picomq-search}"

fetch() {  # <name> <maven group> <artifact> <version>
  local name="$1" group="$2" artifact="$3" version="$4"
  local dest="$cache/$name-$version"
  [[ -f "$dest/.complete" ]] && return 0
  echo "setup: fetching $name $version from Maven Central into $dest"
  mvn -q -B -Dstyle.color=never dependency:get -Dartifact="$group:$artifact:$version:zip" -Dtransitive=false
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
  mvn -q -B -Dstyle.color=never dependency:get -Dartifact="org.opensearch.plugin:ingest-common:$version:jar"
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

# GET / into an unpacked Elasticsearch 8 node: testing/PicomqRestRoot.java, a plugin of ours (the
# node's own root endpoint is a module the integ-test zip leaves out), compiled against the node's
# jars into plugins/picomq-rest-root (idempotent: a marker in the plugin dir).
add_rest_root() {  # <install dir> <version>
  local install="$1" version="$2"
  local plugin="$install/plugins/picomq-rest-root"
  [[ -f "$plugin/.complete" ]] && return 0
  echo "setup: building the tests' GET / plugin into $install"
  local javac=javac
  command -v javac >/dev/null || javac="${PICOMQ_JAVA21_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/javac"
  local tmp
  tmp="$(mktemp -d)"
  "$javac" -d "$tmp/classes" -cp "$install/lib/*" --release 17 "$here/testing/PicomqRestRoot.java"
  rm -rf "$plugin"
  mkdir -p "$plugin"
  (cd "$tmp/classes" && "$(dirname "$(readlink -f "$(command -v "$javac")")")/jar" cf "$plugin/picomq-rest-root.jar" .)
  rm -rf "$tmp"
  cat > "$plugin/plugin-descriptor.properties" <<EOF2
description=GET / for the picomq-connect tests (sinks/elasticsearch/testing/PicomqRestRoot.java)
version=1
name=picomq-rest-root
classname=picomq.testing.PicomqRestRoot
java.version=17
elasticsearch.version=$version
extended.plugins=
has.native.controller=false
EOF2
  chmod -R a+rX "$plugin"
  touch "$plugin/.complete"
}

if [[ "$which" != --oldest ]]; then
  fetch opensearch org.opensearch.distribution.integ-test-zip opensearch 3.6.0
  fetch elasticsearch org.elasticsearch.distribution.integ-test-zip elasticsearch 8.19.21
  add_rest_root "$cache/elasticsearch-8.19.21" 8.19.21
fi
if [[ "$which" != --newest ]]; then
  fetch opensearch org.opensearch.distribution.integ-test-zip opensearch 2.19.6
  add_ingest_common "$cache/opensearch-2.19.6" 2.19.6
  fetch elasticsearch org.elasticsearch.distribution.integ-test-zip elasticsearch 7.10.2
fi

if [[ "$(id -u)" == 0 ]] && ! id -u "$user" >/dev/null 2>&1; then
  echo "setup: creating system user $user (OpenSearch and Elasticsearch refuse to run as root)"
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
fi
# The cache's parents must be traversable by that user (a home directory often is not).
if [[ "$(id -u)" == 0 ]]; then
  d="$cache"
  while [[ "$d" != / ]]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
fi
