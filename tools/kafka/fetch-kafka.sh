#!/usr/bin/env bash
# Apache Kafka's broker jars from Maven Central (the pom beside this script), once.
#   fetch-kafka.sh              into tools/kafka/libs: Kafka 4.1.1 (the benchmarks, the ops tools,
#                               the out-of-tree SDK test)
#   fetch-kafka.sh 4.1|4.4      the tests' brokers, by version (tests/servers/kafka.sh,
#                               PICOMQ_KAFKA_VERSION): once per machine into
#                               ${PICOMQ_SERVER_CACHE:-~/.cache/picomq/servers}/kafka-<x.y.z>/libs
#   fetch-kafka.sh --libs 4.4   prints that folder (fetching it first when missing)
# A folder is complete once its .complete marker exists; concurrent callers wait on one lock.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
print=false
if [[ "${1:-}" == --libs ]]; then print=true; shift; fi
version="${1:-}"

copy_jars() {  # <kafka version> <folder>
  mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies -Dkafka.version="$1" -DoutputDirectory="$2" \
    -DincludeScope=runtime
}

if [[ -z "$version" ]]; then
  libs="$here/libs"
  if [[ -f "$libs/.complete" ]]; then exit 0; fi
  echo "setup: fetching Apache Kafka jars from Maven Central into $libs"
  copy_jars 4.1.1 "$libs"
  touch "$libs/.complete"
  exit 0
fi

case "$version" in
  4.1 | 4.1.1) full=4.1.1 ;;
  4.4 | 4.4.0) full=4.4.0 ;;
  *) echo "fetch-kafka.sh: Kafka '$version' is not one the tests use (4.1 or 4.4)" >&2; exit 2 ;;
esac
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}"
dest="$cache/kafka-$full"
if [[ ! -f "$dest/libs/.complete" ]]; then
  mkdir -p "$cache"
  exec 9>"$cache/kafka-$full.lock"
  flock 9
  if [[ ! -f "$dest/libs/.complete" ]]; then
    echo "setup: fetching Apache Kafka $full jars from Maven Central into $dest/libs" >&2
    rm -rf "$dest"
    mkdir -p "$dest"
    copy_jars "$full" "$dest/libs" >&2
    touch "$dest/libs/.complete"
  fi
  exec 9>&-
fi
if $print; then echo "$dest/libs"; fi
