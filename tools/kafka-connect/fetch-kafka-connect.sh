#!/usr/bin/env bash
# Copies the Apache Kafka Connect runtime and the sink connectors the benchmarks' peers run from
# Maven Central (bench/peers/README.md), once per machine, into a cache outside the clone:
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/kafka-connect-4.1.1/
#     runtime/                          the worker's class path (connect-runtime 4.1.1 & co., and
#                                       connect-file: FileStreamSink)
#     plugins/debezium-connector-jdbc/  one plugin.path entry each (its own class loader):
#     plugins/mongo-kafka-connect/        Debezium's JDBC sink with Hibernate ORM and the PostgreSQL
#     plugins/iceberg-kafka-connect/      driver; MongoDB's sink with its Java driver; Apache
#                                         Iceberg's sink with Parquet, S3 (AWS SDK v2), hadoop-common
# Idempotent: does nothing when .complete names the current poms' checksum; a changed pom fetches
# again into fresh directories (~1 min, ~250 MB; Maven's own cache is ~/.m2).
#   fetch-kafka-connect.sh              fetch when needed
#   fetch-kafka-connect.sh --print-dir  print the folder (fetches nothing)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libs="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/kafka-connect-4.1.1"
if [[ "${1:-}" == --print-dir ]]; then echo "$libs"; exit 0; fi
poms=("$here/runtime/pom.xml" "$here/jdbc-plugin/pom.xml" "$here/mongo-plugin/pom.xml" "$here/iceberg-plugin/pom.xml"
  "$here/postgres-source/pom.xml")
stamp="$(cat "${poms[@]}" "$here/settings.xml" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)"
if [[ -f "$libs/.complete" && "$(cat "$libs/.complete")" == "$stamp" ]]; then exit 0; fi
command -v mvn >/dev/null || { echo "fetch-kafka-connect: mvn not found (apt-get install maven)" >&2; exit 1; }
mkdir -p "$(dirname "$libs")"
exec 9>"$libs.lock"
flock 9
if [[ -f "$libs/.complete" && "$(cat "$libs/.complete")" == "$stamp" ]]; then exit 0; fi
echo "setup: fetching Kafka Connect and its sink connectors from Maven Central into $libs (once)" >&2
rm -rf "$libs"
mkdir -p "$libs/runtime" "$libs/plugins"
# settings.xml mirrors every repository a pom names (Debezium's parent adds Confluent's) to Central.
fetch() {   # fetch POM OUTDIR [mvn args...]
  local pom="$1" out="$2"; shift 2
  mkdir -p "$out"
  mvn -B -s "$here/settings.xml" -f "$pom" dependency:copy-dependencies -DoutputDirectory="$out" \
    -DincludeScope=runtime "$@" > "$libs/fetch.log" 2>&1 ||
    { grep -E 'ERROR' "$libs/fetch.log" | head -20 >&2; echo "fetch-kafka-connect: mvn failed for $pom (log: $libs/fetch.log)" >&2; exit 1; }
}
fetch "$here/runtime/pom.xml" "$libs/runtime"
# The worker provides the Connect API, the Kafka clients and SLF4J to every plugin (Connect loads
# org.apache.kafka.* and org.slf4j.* from its own class path, not from a plugin's), so their copies
# are left out of the plugin dirs; so are the JDBC drivers of the databases not used here.
fetch "$here/jdbc-plugin/pom.xml" "$libs/plugins/debezium-connector-jdbc" \
  -DexcludeGroupIds=org.apache.kafka,org.slf4j \
  -DexcludeArtifactIds=mysql-connector-j,mariadb-java-client,mssql-jdbc,ojdbc11,jcc
fetch "$here/mongo-plugin/pom.xml" "$libs/plugins/mongo-kafka-connect" -DexcludeGroupIds=org.apache.kafka,org.slf4j
fetch "$here/iceberg-plugin/pom.xml" "$libs/plugins/iceberg-kafka-connect" -DexcludeGroupIds=org.apache.kafka,org.slf4j
fetch "$here/postgres-source/pom.xml" "$libs/plugins/debezium-connector-postgres" -DexcludeGroupIds=org.apache.kafka,org.slf4j
echo "$stamp" > "$libs/.complete"
