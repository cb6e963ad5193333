#!/usr/bin/env bash
# Copies the Apache Kafka Connect runtime, the Debezium JDBC sink connector (with Hibernate ORM,
# Agroal and the PostgreSQL JDBC driver) and MongoDB's sink connector (mongo-kafka-connect 2.0.1
# with the MongoDB Java driver) from Maven Central into tools/kafka-connect/libs (once):
#   libs/runtime/                           the worker's classpath (connect-runtime 4.1.1 & co.)
#   libs/plugins/debezium-connector-jdbc/   one plugin.path entry (its own class loader)
#   libs/plugins/mongo-kafka-connect/       another
# Idempotent: does nothing when libs/.complete names the current poms' checksum; a changed pom
# fetches again into fresh directories. Used by bench/peers/kafka_connect_jdbc.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libs="$here/libs"
stamp="$(cat "$here/runtime/pom.xml" "$here/jdbc-plugin/pom.xml" "$here/mongo-plugin/pom.xml" "$here/settings.xml" | sha256sum | cut -c1-16)"
if [[ -f "$libs/.complete" && "$(cat "$libs/.complete")" == "$stamp" ]]; then exit 0; fi
command -v mvn >/dev/null || { echo "fetch-kafka-connect: mvn not found (apt-get install maven)" >&2; exit 1; }
echo "setup: fetching Kafka Connect + Debezium JDBC sink jars from Maven Central into $libs" >&2
rm -rf "$libs"
mkdir -p "$libs/runtime" "$libs/plugins/debezium-connector-jdbc" "$libs/plugins/mongo-kafka-connect"
# settings.xml mirrors every repository a pom names (Debezium's parent adds Confluent's) to Central.
fetch() {   # fetch POM OUTDIR [mvn args...]
  local pom="$1" out="$2"; shift 2
  mvn -B -s "$here/settings.xml" -f "$pom" dependency:copy-dependencies -DoutputDirectory="$out" \
    -DincludeScope=runtime "$@" > "$libs/fetch.log" 2>&1 ||
    { grep -E 'ERROR' "$libs/fetch.log" | head -20 >&2; echo "fetch-kafka-connect: mvn failed for $pom (log: $libs/fetch.log)" >&2; exit 1; }
}
fetch "$here/runtime/pom.xml" "$libs/runtime"
# The worker provides the Connect API, the Kafka clients and SLF4J to every plugin (Connect loads
# org.apache.kafka.* and org.slf4j.* from its own class path, not from a plugin's), so their copies
# are left out of the plugin dir; so are the JDBC drivers of the databases not used here.
fetch "$here/jdbc-plugin/pom.xml" "$libs/plugins/debezium-connector-jdbc" \
  -DexcludeGroupIds=org.apache.kafka,org.slf4j \
  -DexcludeArtifactIds=mysql-connector-j,mariadb-java-client,mssql-jdbc,ojdbc11,jcc
# MongoDB's own sink connector (the MongoDB sink's peer, bench/peers/kafka_connect_mongo.sh).
fetch "$here/mongo-plugin/pom.xml" "$libs/plugins/mongo-kafka-connect" -DexcludeGroupIds=org.apache.kafka,org.slf4j
echo "$stamp" > "$libs/.complete"
