#!/usr/bin/env python3
"""The table of bench/peers.sh: picomq-connect against each destination's peer.

    peers_report.py WORK N LOAD_BEFORE LOAD_AFTER DESTINATION...

Reads WORK/<destination>/results.txt (bench/sink_bench.sh's raw results, parsed as
bench/sink_report.py does) and prints, per destination and peer, the medians over the rounds:
records/s end to end (process start -> the destination holds all N records, both sides) and
after start-up (picomq: partition assigned -> last commit; peer: first row -> last row), records
per client CPU-second (the runtime's / the peer's process tree, start-up included), peak RSS, and
the destination server's CPU and the Kafka broker's (fetches, commits, the group protocol; picomq's
holds the bench helper's committed-offset polls, ~1 ms each; Kafka Connect commits offsets every
offset.flush.interval.ms); then picomq / peer for each, and the range of records/s end to end
over the rounds. Then the peers that could not be run here, each with why (NOT_RUN).
"""
import datetime
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sink_report import parse, summarize  # noqa: E402  (one reading of the results format)


# Peers the issue names that cannot be had from the registries reachable here, or do not do the same job.
NOT_RUN = [
    ("clickhouse", "ClickHouse's Kafka Connect sink",
     "not on Maven Central (com.clickhouse.kafka:clickhouse-kafka-connect: 404; published on GitHub releases and "
     "Confluent Hub only, neither reachable here)"),
    ("http", "Kafka Connect HTTP sinks; Telegraf outputs.http",
     "Aiven's and Confluent's HTTP sinks and Camel's Kafka connectors are not on Maven Central (404); Telegraf's "
     "http output is not the same job: it posts metrics re-serialized, not the records, and the benchmark's "
     "endpoint (nginx answering 204) cannot count records inside a body to stop a clock"),
    ("s3", "Confluent's / Aiven's S3 sinks",
     "not on Maven Central (io.confluent:kafka-connect-s3, io.aiven:s3-connector-for-apache-kafka: 404)"),
]


# Per peer: the settings matched, and where the peer's guarantee under replay differs from the sink's
# (docs/sinks/<sink>.md, "Behaviour under replay").
GUARANTEE = {
    "kafka-connect-file": "both at least once (a file cannot deduplicate); both StringConverter-plain lines, 1000 records a poll",
    "kafka-connect-jdbc": "keyed by Kafka coordinates like the sink's pico_id, inserts, batch 1000, jsonb; a replayed "
                          "record fails Debezium's INSERT on the key (the task stops), the sink skips it",
    "telegraf-postgresql": "at least once and no key: a replay adds the rows again (the sink: once, by pico_id); "
                           "typed columns, not the sink's jsonb + metadata",
    "kafka-connect-mongodb": "_id = topic-partition-offset and unordered inserts, as the sink's record_id; the same "
                             "once-per-record outcome; the same documents (the sink's include_metadata = false) "
                             "and bulk size (20,000: the sink's max_batch_records, the worker's max.poll.records)",
    "telegraf": "points keyed by series and time as the sink's mapping: a replay overwrites, as the sink's",
    "telegraf-opensearch": "at least once with ids the cluster makes: a replay doubles documents (the sink: _id = "
                           "record id, overwritten); 1000 documents a _bulk as the sink",
    "kafka-connect-iceberg": "exactly once (control topic transactions), as the sink; zstd, 128 MiB files; commits "
                             "every 2 s (~8 per million records) against the sink's every 100,000 records (10)",
    "python-deltalake": "at least once (offsets committed after each write: a crash between doubles a window); the "
                        "sink: exactly once (txn app ids); the sink's roll, file size and codec",
}


def span(s, n):
    """records/s end to end, slowest and fastest round."""
    return f"{n / max(s['e2es']):,.0f}-{n / min(s['e2es']):,.0f}"


def server(s):
    return "-" if math.isnan(s["server"]) else f"{s['server']:.1f}"  # no server process (Delta: files)


def broker(s):
    return "-" if math.isnan(s["broker"]) else f"{s['broker']:.2f}"


def main() -> None:
    work, n, load_before, load_after = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    destinations = sys.argv[5:]
    print(f"== picomq-connect against the alternatives ({datetime.date.today().isoformat()}); "
          f"load average {load_before} before, {load_after} after")
    header = ("| destination | peer | N | rounds | records/s picomq / peer (x) | after start-up (x) "
              "| rec/CPU-s picomq / peer (x) | peak RSS MB picomq / peer (x) | server CPU s picomq / peer "
              "| broker CPU s picomq / peer | records/s range picomq; peer |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for dest in destinations:
        path = os.path.join(work, dest, "results.txt")
        if not os.path.exists(path):
            print(f"| {dest} | - | - | - | no results ({path}) | | | | | | |")
            continue
        rows = parse(path)
        picomq = [r for r in rows if r["kind"] == "picomq"]
        peers = sorted({r["entry"] for r in rows if r["kind"] == "peer"})
        if not peers:
            print(f"| {dest} | none ran: see {dest}.log | | | | | | | | | |")
            continue
        p = summarize(picomq, "picomq", n, 0)
        for peer in peers:
            q = summarize([r for r in rows if r["entry"] == peer], "peer", n, 0)

            def pair(a, b, fmt):
                ratio = a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")
                return f"{a:{fmt}} / {b:{fmt}} ({ratio:.2f})"

            print(f"| {dest} | {peer} | {n:,} | {min(len(p['loads']), len(q['loads']))} | {pair(p['rps_e2e'], q['rps_e2e'], ',.0f')} "
                  f"| {p['rps'] / q['rps']:.2f} | {pair(p['rpcpu'], q['rpcpu'], ',.0f')} "
                  f"| {pair(p['rss'], q['rss'], '.0f')} | {server(p)} / {server(q)} | {broker(p)} / {broker(q)} "
                  f"| {span(p, n)}; {span(q, n)} |")
    print()
    print("Settings and guarantees:")
    for dest in destinations:
        path = os.path.join(work, dest, "results.txt")
        if os.path.exists(path):
            for peer in sorted({r["entry"] for r in parse(path) if r["kind"] == "peer"}):
                print(f"- {dest} / {peer}: {GUARANTEE.get(peer, '(see bench/peers/README.md)')}")
    print()
    print("Not run:")
    for dest, peer, why in NOT_RUN:
        print(f"- {dest}: {peer}: {why}")


if __name__ == "__main__":
    main()
