#!/usr/bin/env python3
"""The table of bench/changes.sh: picomq-connect against Kafka Connect's Debezium JDBC sink.

    changes_report.py RESULTS N RUNS SOURCE_ROWS LOAD_BEFORE LOAD_AFTER NOTE

RESULTS has one line per run: "entry=<picomq|kafka-connect> run=<i> key=value ..." (bench_peer's
fields from the runner's JSON line, plus equal=0|1 and load1). Per entry, the medians over the runs:

  wall s      process start -> the replica equals the source (both measured by the same poller)
  start s     process start -> the first rows visible in the replica (start-up: the JVM, plugin
              discovery, group join; picomq: its start and group join)
  rec/s       N / wall: change events applied per second, end to end
  CPU s       utime + stime of the process tree at that moment (the JVM's children included)
  rec/CPU-s   N / CPU s: the issue's figure (target: picomq >= 3x Kafka Connect)
  srv CPU s   the destination PostgreSQL's process tree over the same time (the polling included)
  rec/all-CPU-s  N / (CPU s + srv CPU s): the whole cost of applying the changes
  RSS MB      the largest peak RSS (VmHWM) among the process tree
Then picomq / Kafka Connect for each, the rounds, and whether every replica equalled the source.
"""
import statistics
import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from sink_report import parse  # noqa: E402  (one reading of the key=value results format)

LABELS = {"picomq": "picomq-connect postgres sink", "kafka-connect": "Kafka Connect + Debezium JDBC sink"}


def main():
    path, n, runs, source_rows, load_before, load_after, note = sys.argv[1:8]
    n = int(n)
    rows = parse(path)
    med = statistics.median
    entries = [e for e in ("picomq", "kafka-connect") if any(r["entry"] == e for r in rows)]
    s = {}
    for e in entries:
        rs = [r for r in rows if r["entry"] == e]
        cpu = [r["user_s"] + r.get("sys_s", 0) for r in rs]
        srv = [r.get("server_cpu_s", float("nan")) for r in rs]
        s[e] = {
            "wall": med([r["wall_s"] for r in rs]),
            "start": med([r["join_s"] for r in rs]),
            "rps": med([n / r["wall_s"] for r in rs]),
            "cpu": med(cpu),
            "rpc": med([n / c for c in cpu]),
            "srv": med(srv),
            "rpa": med([n / (c + v) for c, v in zip(cpu, srv)]),
            "rss": med([r["hwm_kb"] / 1024 for r in rs]),
            "rounds": " ".join(f"{r['wall_s']:.2f}" for r in rs),
            "rounds_rpc": " ".join(f"{n / c / 1000:.0f}k" for c in cpu),
            "equal": all(int(r["equal"]) == 1 for r in rs),
            "replica_rows": sorted({int(r["replica_rows"]) for r in rs}),
        }
    print(f"\n== change events into PostgreSQL: {n:,} Debezium events (JSON with schemas, one partition), "
          f"{runs} round(s); source table {int(source_rows):,} rows at the end ==")
    print(f"   {note}")
    print(f"   load average (1, 5, 15 min) before: {load_before}; after: {load_after}\n")
    print("| entry | wall s | start s | rec/s | CPU s | rec/CPU-s | srv CPU s | rec/all-CPU-s | RSS MB | rounds (wall s) | rounds (rec/CPU-s) | rows equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for e in entries:
        x = s[e]
        print(f"| {LABELS[e]} | {x['wall']:.2f} | {x['start']:.2f} | {x['rps']:,.0f} | {x['cpu']:.2f} | {x['rpc']:,.0f} | "
              f"{x['srv']:.2f} | {x['rpa']:,.0f} | {x['rss']:.0f} | {x['rounds']} | {x['rounds_rpc']} | "
              f"{'yes' if x['equal'] else 'NO'} ({', '.join(str(v) for v in x['replica_rows'])} rows) |")
    if len(entries) == 2:
        p, k = s["picomq"], s["kafka-connect"]
        rpc = p["rpc"] / k["rpc"]
        print(f"\npicomq / Kafka Connect: records/s {p['rps'] / k['rps']:.2f}x, records per CPU-second {rpc:.2f}x "
              f"(target >= 3: {'met' if rpc >= 3 else 'NOT met'}), records per CPU-second with the server's "
              f"{p['rpa'] / k['rpa']:.2f}x, server CPU {p['srv'] / k['srv']:.2f}x, peak RSS {p['rss'] / k['rss']:.2f}x, "
              f"start-up {p['start']:.2f} s vs {k['start']:.2f} s")
    print("every replica equal to the source: " + ("yes" if all(x["equal"] for x in s.values()) else "NO"))


if __name__ == "__main__":
    main()
