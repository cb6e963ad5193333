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
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sink_report import parse  # noqa: E402  (one parser for the results format)


def summary(rows, n):
    med = statistics.median
    cpu = [r.get("user_s", 0) + r.get("sys_s", 0) for r in rows]
    rss = [(r["hwm_kb"] if r.get("hwm_kb", -1) > 0 else r.get("maxrss_kb", 0)) / 1024 for r in rows]
    server = [r.get("server_cpu_s", float("nan")) for r in rows]
    return {
        "rps": med([n / r["wall_s"] for r in rows]),
        "rps_loaded": med([n / (r["wall_s"] - r.get("join_s", 0)) for r in rows]),
        "rpcpu": med([n / c for c in cpu]) if all(c > 0 for c in cpu) else float("nan"),
        "rss": med(rss),
        "server": med(server) if not any(math.isnan(s) for s in server) else float("nan"),
        "rounds": len(rows),
    }


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
        p = summary(picomq, n)
        for peer in peers:
            q = summary([r for r in rows if r["entry"] == peer], n)

            def pair(a, b, fmt):
                ratio = a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")
                return f"{a:{fmt}} / {b:{fmt}} ({ratio:.2f})"

            print(f"| {dest} | {peer} | {n:,} | {min(p['rounds'], q['rounds'])} | {pair(p['rps'], q['rps'], ',.0f')} "
                  f"| {p['rps_loaded'] / q['rps_loaded']:.2f} | {pair(p['rpcpu'], q['rpcpu'], ',.0f')} "
                  f"| {pair(p['rss'], q['rss'], '.0f')} | {server(p)} / {server(q)} |")


if __name__ == "__main__":
    main()
