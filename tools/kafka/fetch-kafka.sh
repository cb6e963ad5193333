#!/usr/bin/env bash
# Copies Apache Kafka's broker jars into tools/kafka/libs (once).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libs="$here/libs"
if [[ -f "$libs/.complete" ]]; then exit 0; fi
echo "setup: fetching Apache Kafka jars from Maven Central into $libs"
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs" -DincludeScope=runtime
touch "$libs/.complete"
