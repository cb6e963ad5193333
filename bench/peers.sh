#!/usr/bin/env bash
# picomq-connect against the connectors a user would run instead, on the same records, in one
# command (bench/README.md, "peers.sh"). For each destination with a peer, bench/sink_bench.sh
# runs picomq-connect's sink and the peer side by side (BENCH_PEER=1; the destination's own
# loaders left out: BENCH_BASELINES=0): the same topic of N records of the orders shape, each
# system from process start until the destination holds the N records (checked by the adapter's
# independent reader), rounds alternating. Then one table: records/s, records per CPU-second,
# peak RSS, the destination server's CPU and the Kafka broker's, picomq / peer, with the load average.
#
#   bash bench/peers.sh
#   BENCH_PEERS_DESTINATIONS="postgres influxdb" bash bench/peers.sh
#
# Environment:
#   BENCH_PEERS_DESTINATIONS="stdout postgres mongodb influxdb elasticsearch iceberg delta"
#                             sink_bench adapters with a peer
#   BENCH_RECORDS=1000000     records per destination (orders shape, ~207 B)
#   BENCH_RUNS=3              rounds per pair
#   BENCH_SKIP_BUILD=0        1: use the existing build/
#   BENCH_DIR=                work dir (default: a new mktemp -d); kept, one folder per destination
# Smoke mode for CI: BENCH_SKIP_BUILD=1 BENCH_RECORDS=20000 BENCH_RUNS=1 BENCH_PEERS_DESTINATIONS=postgres.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
destinations="${BENCH_PEERS_DESTINATIONS:-stdout postgres mongodb influxdb elasticsearch iceberg delta}"
work="${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/picomq-peers.XXXXXX")}"
mkdir -p "$work"
chmod 0755 "$work"   # destination servers run as other users (PostgreSQL as "postgres") under it
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
skip_build="${BENCH_SKIP_BUILD:-0}"
for dest in $destinations; do
  [[ -f "$here/sinks/$dest.sh" ]] || { echo "peers: no adapter bench/sinks/$dest.sh" >&2; exit 2; }
  echo "peers: $dest (work dir $work/$dest)" >&2
  # The sink's settings where the peer's differ from the adapter's defaults (an operator's env wins).
  matched=()
  case "$dest" in
    # Iceberg's Kafka Connect sink commits every 2 s (bench/peers/kafka_connect_iceberg.sh): about 8
    # commits per million records at its rate. The adapter's 400,000 records per commit (3 per
    # million, against pyiceberg's one append) would hold 2.5x the records in memory between commits.
    iceberg) matched=("BENCH_ICEBERG_COMMIT_RECORDS=${BENCH_ICEBERG_COMMIT_RECORDS:-100000}"
                      "BENCH_ICEBERG_BUFFER_RECORDS=${BENCH_ICEBERG_BUFFER_RECORDS:-100000}") ;;
    # mongo-kafka-connect writes the record's fields and an _id of its coordinates, as the sink with
    # include_metadata = false (its default adds six pico_* fields: more for FerretDB to store); its
    # bulk write is one put(), max.poll.records, here the sink's max_batch_records (20,000).
    mongodb) matched=("BENCH_MONGO_METADATA=${BENCH_MONGO_METADATA:-false}"
                      "KC_MAX_POLL_RECORDS=${KC_MAX_POLL_RECORDS:-20000}") ;;
  esac
  # One build for all: the first destination builds unless told not to.
  env ${matched[@]+"${matched[@]}"} BENCH_PEER=1 BENCH_BASELINES=0 BENCH_SINK="$dest" BENCH_KEEP=1 BENCH_DIR="$work/$dest" \
    BENCH_SKIP_BUILD="$skip_build" bash "$here/sink_bench.sh" > "$work/$dest.report.txt" 2> >(tee "$work/$dest.log" >&2) ||
    { echo "peers: $dest failed (its report: $work/$dest.report.txt, logs in $work/$dest)" >&2; exit 1; }
  skip_build=1
done
python3 "$here/peers_report.py" "$work" "${BENCH_RECORDS:-1000000}" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" $destinations |
  tee "$work/peers.txt"
