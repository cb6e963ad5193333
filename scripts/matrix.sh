#!/usr/bin/env bash
# The server-version matrix (docs/matrix.md): the suites whose servers the tests choose by version,
# against the oldest version the docs support and the newest the registries serve, in two passes:
#   oldest  PICOMQ_PG_VERSION=15  PICOMQ_KAFKA_VERSION=4.1  PICOMQ_OPENSEARCH_VERSION=2.19  PICOMQ_ELASTICSEARCH_VERSION=7.10
#   newest  PICOMQ_PG_VERSION=18  PICOMQ_KAFKA_VERSION=4.4  PICOMQ_OPENSEARCH_VERSION=3.6   PICOMQ_ELASTICSEARCH_VERSION=8.19
# (newest: the defaults, what CI runs). The suites (CTest names):
#   integration_0..2         the runtime through Kafka, the PostgreSQL sink's and PostgreSQL server's tests among them
#   conformance_stdout       the conformance suite through Kafka, the runtime's own sink
#   conformance_postgres, conformance_redshift, redshift_kafka, changes_debezium (a PostgreSQL source),
#   postgres_server_watchdog the PostgreSQL and Redshift-stand-in suites
#   elasticsearch_sink, conformance_elasticsearch   one node of each flavor per binary
# One suite at a time, each timed; a table of pass / fail and seconds at the end (also written to
# <build>/matrix/results-<passes>.md). Every server is fetched once per machine (scripts/setup.sh does it;
# otherwise each script fetches what it misses). ClickHouse's versions are not here.
#   bash scripts/matrix.sh                 both passes (build/ must be built: scripts/build.sh)
#   bash scripts/matrix.sh oldest          one pass
#   PICOMQ_MATRIX_BUILD=dir                another build tree
#   PICOMQ_MATRIX_TESTS="a b"              other CTest names (e.g. one suite)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(realpath "${PICOMQ_MATRIX_BUILD:-$here/build}")"
passes=("$@")
((${#passes[@]})) || passes=(oldest newest)
tests=(${PICOMQ_MATRIX_TESTS:-integration_0 integration_1 integration_2 conformance_stdout conformance_postgres
  conformance_redshift redshift_kafka changes_debezium postgres_server_watchdog elasticsearch_sink
  conformance_elasticsearch})
export PICOMQ_TEST_TIMEOUT_MULTIPLIER="${PICOMQ_TEST_TIMEOUT_MULTIPLIER:-2}"
[[ -f "$build/CTestTestfile.cmake" ]] || { echo "matrix: no CTest tree in $build (bash scripts/build.sh first)" >&2; exit 2; }
out="$build/matrix"
mkdir -p "$out"

versions() {  # <pass>: the environment of that pass
  case "$1" in
    oldest) echo "PICOMQ_PG_VERSION=15 PICOMQ_KAFKA_VERSION=4.1 PICOMQ_OPENSEARCH_VERSION=2.19 PICOMQ_ELASTICSEARCH_VERSION=7.10" ;;
    newest) echo "PICOMQ_PG_VERSION=18 PICOMQ_KAFKA_VERSION=4.4 PICOMQ_OPENSEARCH_VERSION=3.6 PICOMQ_ELASTICSEARCH_VERSION=8.19" ;;
    *) echo "matrix: a pass is oldest or newest, not '$1'" >&2; exit 2 ;;
  esac
}

for pass in "${passes[@]}"; do versions "$pass" >/dev/null || exit 2; done
# The servers a pass needs, before its clock starts (once per machine; nothing when cached).
bash "$here/sinks/elasticsearch/fetch-servers.sh" >&2
for pass in "${passes[@]}"; do
  env $(versions "$pass") bash -c '"$1/sinks/postgres/fetch-server.sh" "$PICOMQ_PG_VERSION" &&
    "$1/tools/kafka/fetch-kafka.sh" "$PICOMQ_KAFKA_VERSION"' _ "$here" >&2
done

name="$(IFS=-; echo "${passes[*]}")"
results="$out/results-$name.tsv"
: > "$results"
start_all=$(date +%s)
rc=0
for pass in "${passes[@]}"; do
  for t in "${tests[@]}"; do
    log="$out/$pass.$t.log"
    echo "[matrix] $(date +%T) $pass: $t ($(versions "$pass"))" >&2
    s=$(date +%s)
    if (cd "$build" && env $(versions "$pass") ctest --output-on-failure --timeout 1800 -R "^$t\$" >"$log" 2>&1); then
      r=pass
    else
      r=FAIL; rc=1
    fi
    # ctest -R with a fixture runs its setup test too: "No tests were found" is a wrong name.
    if grep -q 'No tests were found' "$log"; then r="no such test"; rc=1; fi
    took=$(($(date +%s) - s))
    printf '%s\t%s\t%s\t%s\n' "$pass" "$t" "$r" "$took" >>"$results"
    echo "[matrix] $pass: $t $r in ${took}s (log: $log)" >&2
  done
done
total=$(($(date +%s) - start_all))
{
  echo "| suite | $(for p in "${passes[@]}"; do printf '%s (%s) | ' "$p" "$(versions "$p" | sed 's/PICOMQ_//g; s/_VERSION//g')"; done)"
  echo "|---|$(for _ in "${passes[@]}"; do printf -- '---|'; done)"
  for t in "${tests[@]}"; do
    printf '| %s |' "$t"
    for p in "${passes[@]}"; do
      awk -F'\t' -v p="$p" -v t="$t" '$1 == p && $2 == t { printf " %s, %d s |", $3, $4 }' "$results"
    done
    echo
  done
  echo
  echo "The matrix: $((total / 60)) min $((total % 60)) s ($(nproc) cores, one suite at a time)."
} | tee "$out/results-$name.md"
exit "$rc"
