#!/usr/bin/env python3
"""The table of bench/peers.sh: picomq-connect against each destination's peer.

    peers_report.py WORK N LOAD_BEFORE LOAD_AFTER DESTINATION...

Reads WORK/<destination>/results.txt (bench/sink_bench.sh's raw results, parsed as
bench/sink_report.py does) and prints, per destination and peer, the medians over the rounds:
records/s end to end (process start -> the destination holds all N records, both sides) and
after start-up (picomq: partition assigned -> last commit; peer: first row -> last row), records
per client CPU-second (the runtime's / the peer's process tree, start-up included), peak RSS, and
the destination server's CPU; then picomq / peer for each.
"""
import datetime
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sink_report import parse, summarize  # noqa: E402  (one reading of the results format)


def server(s):
    return "-" if math.isnan(s["server"]) else f"{s['server']:.1f}"  # no server process (Delta: files)


def main() -> None:
    work, n, load_before, load_after = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    destinations = sys.argv[5:]
    print(f"== picomq-connect against the alternatives ({datetime.date.today().isoformat()}); "
          f"load average {load_before} before, {load_after} after")
    header = ("| destination | peer | N | rounds | records/s picomq / peer (x) | after start-up (x) "
              "| rec/CPU-s picomq / peer (x) | peak RSS MB picomq / peer (x) | server CPU s picomq / peer |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for dest in destinations:
        path = os.path.join(work, dest, "results.txt")
        if not os.path.exists(path):
            print(f"| {dest} | - | - | - | no results ({path}) | | | | |")
            continue
        rows = parse(path)
        picomq = [r for r in rows if r["kind"] == "picomq"]
        peers = sorted({r["entry"] for r in rows if r["kind"] == "peer"})
        if not peers:
            print(f"| {dest} | none ran: see {dest}.log | | | | | | | |")
            continue
        p = summarize(picomq, "picomq", n, 0)
        for peer in peers:
            q = summarize([r for r in rows if r["entry"] == peer], "peer", n, 0)

            def pair(a, b, fmt):
                ratio = a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")
                return f"{a:{fmt}} / {b:{fmt}} ({ratio:.2f})"

            print(f"| {dest} | {peer} | {n:,} | {min(len(p['loads']), len(q['loads']))} | {pair(p['rps_e2e'], q['rps_e2e'], ',.0f')} "
                  f"| {p['rps'] / q['rps']:.2f} | {pair(p['rpcpu'], q['rpcpu'], ',.0f')} "
                  f"| {pair(p['rss'], q['rss'], '.0f')} | {server(p)} / {server(q)} |")


if __name__ == "__main__":
    main()
