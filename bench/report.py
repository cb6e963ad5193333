#!/usr/bin/env python3
"""Prints the summary table of bench/stdout_vs_kcat.sh from its raw results file.

    report.py RESULTS N PAYLOAD_BYTES RUNS MACHINE_NOTE

RESULTS has one line per consumer run: "tool=<label> run=<i> key=value ..." (bench_helper's
output). Every figure in the table is the median over the runs of that tool.
"""
import datetime
import statistics
import sys


def parse(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        tool, rest = line.split(" run=", 1)
        fields = {"tool": tool.removeprefix("tool=")}
        run, rest = rest.split(" ", 1)
        fields["run"] = int(run)
        for kv in rest.split():
            k, v = kv.split("=", 1)
            fields[k] = float(v)
        rows.append(fields)
    return rows


def main() -> None:
    path, n, payload, runs, note = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    # What one of the helper's polls of a sink's committed offset costs the broker (its CPU per poll):
    # taken out of the picomq runs' broker CPU (kcat and rdkafka_performance are not polled).
    poll_cpu = float(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] else 0.0
    rows = parse(path)
    tools = []
    for r in rows:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    med = statistics.median

    summary = {}
    for t in tools:
        rs = [r for r in rows if r["tool"] == t]
        walls = [r["wall_s"] for r in rs]
        cpus = [r["user_s"] + r["sys_s"] for r in rs]
        rss = [r["maxrss_kb"] / 1024 for r in rs]
        s = {
            "wall": med(walls),
            "rps": med([n / w for w in walls]),
            "mbps": med([payload / w / 1e6 for w in walls]),
            "cpu": med(cpus),
            "rpcpu": med([n / c for c in cpus if c > 0]) if any(c > 0 for c in cpus) else float("nan"),
            "rss": med(rss),
            "rss_max": max(rss),
            "walls": walls,
        }
        if all("server_cpu_s" in r for r in rs):
            s["broker_cpu"] = med([max(0.0, r["server_cpu_s"] - r.get("polls", 0) * poll_cpu) for r in rs])
            s["broker_cpu_raw"] = med([r["server_cpu_s"] for r in rs])
        for key in ("req_fetch", "req_commit", "req_heartbeat", "req_other"):
            if all(key in r for r in rs):
                s[key] = med([r[key] for r in rs])
        if "join_s" in rs[0]:
            joins = [r["join_s"] for r in rs]
            s["join"] = med(joins)
            s["first_commit"] = med([r["first_commit_s"] for r in rs])
            s["rps_x"] = med([n / (r["wall_s"] - r["join_s"]) for r in rs])
            s["mbps_x"] = med([payload / (r["wall_s"] - r["join_s"]) / 1e6 for r in rs])
            s["shutdown"] = med([r["shutdown_s"] for r in rs])
        summary[t] = s

    print()
    print(f"== picomq-connect stdout sink vs kcat -C  ({datetime.date.today().isoformat()})")
    print(f"   {n} records, {payload / 1e6:.1f} MB payload ({payload / n:.0f} B/record avg), 1 partition, "
          f"{runs} run(s) each, medians; {note}")
    print()
    hdr = f"{'consumer':<18}{'wall s':>8}{'records/s':>12}{'MB/s':>8}{'CPU s':>8}{'rec/CPU-s':>11}{'peak RSS MB':>13}   runs (wall s)"
    print(hdr)
    print("-" * len(hdr))
    for t in tools:
        s = summary[t]
        print(f"{t:<18}{s['wall']:>8.2f}{s['rps']:>12,.0f}{s['mbps']:>8.1f}{s['cpu']:>8.2f}{s['rpcpu']:>11,.0f}"
              f"{s['rss']:>13.1f}   {' '.join(f'{w:.2f}' for w in s['walls'])}")
    # What each consumer cost the broker: its CPU over the run and the requests it served (JMX),
    # per million records; OffsetFetch left out (the measuring helper polls the sink's commits).
    if any("broker_cpu" in summary[t] for t in tools):
        print()
        print("the broker's work per million records (CPU over the run, the helper's polls taken out"
              f" at {poll_cpu * 1e3:.2f} ms each, as measured; requests by API; medians):")
        hdr2 = (f"{'consumer':<18}{'broker CPU s':>13}{'(raw)':>8}{'Fetch':>9}{'OffsetCommit':>14}{'Heartbeat':>11}"
                f"{'other':>8}")
        print(hdr2)
        print("-" * len(hdr2))
        per_m = 1e6 / n
        for t in tools:
            s = summary[t]
            if "broker_cpu" not in s:
                continue
            reqs = "".join(f"{s[k] * per_m:>{w},.0f}" if k in s else f"{'-':>{w}}"
                           for k, w in (("req_fetch", 9), ("req_commit", 14), ("req_heartbeat", 11), ("req_other", 8)))
            print(f"{t:<18}{s['broker_cpu'] * per_m:>13.3f}{s['broker_cpu_raw'] * per_m:>8.3f}{reqs}")
    picomq = [t for t in tools if t.startswith("picomq")]
    for t in picomq:
        p = summary[t]
        print()
        print(f"{t} excluding group join (start -> partition assigned, median {p['join']:.2f} s; "
              f"first batch committed at {p['first_commit']:.2f} s):")
        print(f"{'':<16}{p['wall'] - p['join']:>8.2f}{p['rps_x']:>12,.0f}{p['mbps_x']:>8.1f}")
        print(f"(shutdown after the last commit, not in wall: median {p['shutdown']:.2f} s; back-pressure pauses "
              f"per run: {' '.join(str(int(r.get('pauses', 0))) for r in rows if r['tool'] == t)})")
    # Like for like: the same bytes on stdout. `picomq lines` (include_metadata = false) prints
    # each payload on its own line, exactly what `kcat -f '%s\n'` prints; `picomq envelope`
    # prints a JSON object with the metadata fields, as `kcat -J` does.
    lines_note = ("raw: picomq prints each payload as a base64 JSON string, kcat the bytes; target >= 1.0"
                  if "schema=raw" in note else "same output, target >= 1.0")
    pairs = [("picomq lines", "kcat -f", lines_note),
             ("picomq lines", "rdkafka_perf -C", "librdkafka's own loop, which prints nothing"),
             ("picomq lines>file", "kcat -f>file", "both write the lines to a file on disk"),
             ("picomq envelope", "kcat -J", "both print a JSON envelope"),
             ("picomq lines", "baseline lines", "this build vs BENCH_BASELINE, same output"),
             ("picomq envelope", "kcat -f", "envelope vs payload lines")]
    pairs = [(a, b, why) for a, b, why in pairs if a in summary and b in summary]
    if pairs:
        print()
        print("ratio picomq-connect / kcat, records/s, end-to-end (process start -> last record committed")
        print("for picomq-connect, process start -> exit for kcat):")
        for a, b, why in pairs:
            p, k = summary[a], summary[b]
            print(f"  {a:<16} vs {b:<8} {p['rps'] / k['rps']:>5.2f}   (excluding group join: {p['rps_x'] / k['rps']:.2f})"
                  f"   CPU efficiency (rec/CPU-s) {p['rpcpu'] / k['rpcpu']:.2f}"
                  f"   peak RSS {p['rss'] / k['rss']:.2f}"
                  + (f"   broker CPU {p['broker_cpu'] / k['broker_cpu']:.2f}" if "broker_cpu" in p and "broker_cpu" in k
                     and k["broker_cpu"] > 0 else "")
                  + f"   [{why}]")
    with open("/proc/loadavg") as f:
        print("load average at the end: " + " ".join(f.read().split()[:3]))
    print()


if __name__ == "__main__":
    main()
