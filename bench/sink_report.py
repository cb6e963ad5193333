#!/usr/bin/env python3
"""Prints the summary table of bench/sink_bench.sh from its raw results file.

    sink_report.py RESULTS N PAYLOAD_BYTES RUNS SINK DESCRIPTION NOTE NOTES_FILE [TARGET]

RESULTS has one line per run: "entry=<label> kind=<picomq|baseline|peer> run=<i> key=value ..."
(bench_helper's fields plus the adapter's). TARGET is "baseline:ratio" (e.g. copy-binary:0.8):
the report says whether every picomq entry reaches that ratio of the baseline's records/s.
Every figure is the median over the runs of an entry.

Times:
  load s  picomq: from the partition being assigned (status file; the first fetch follows) to
          the last offset committed, i.e. first record consumed -> last commit. Baselines:
          process start -> exit. Peers: first row visible -> last row visible.
  e2e s   picomq: process start -> last commit (group join included). Baselines: as load.
          Peers: process (JVM) start -> last row visible.
CPU: client = the runtime / psql / the peer's process (all threads); server = the destination
server's process tree over the same interval (when the adapter names a server).
"""
import datetime
import math
import statistics
import sys


def parse(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        fields = {}
        for kv in line.split():
            k, v = kv.split("=", 1)
            if k in ("entry", "kind"):
                fields[k] = v
            else:
                try:
                    fields[k] = float(v)
                except ValueError:
                    fields[k] = v
        rows.append(fields)
    return rows


def cpu(r):
    return r.get("user_s", 0) + r.get("sys_s", 0)


def summarize(rs, k, n, payload):
    """The medians of one entry's runs `rs` (kind `k`: picomq, baseline or peer; see Times above)."""
    med = statistics.median
    e2e = [r["wall_s"] for r in rs]
    load = [r["wall_s"] - r.get("join_s", 0) if k != "baseline" else r["wall_s"] for r in rs]
    rss = [(r.get("hwm_kb", -1) if r.get("hwm_kb", -1) > 0 else r.get("maxrss_kb", 0)) / 1024 for r in rs]
    server = [r.get("server_cpu_s", float("nan")) for r in rs]
    has_server = all(not math.isnan(s) for s in server)
    s = {
        "load": med(load), "e2e": med(e2e),
        "rps": med([n / w for w in load]), "rps_e2e": med([n / w for w in e2e]),
        "mbps": med([payload / w / 1e6 for w in load]),
        "cpu": med([cpu(r) for r in rs]),
        "rpcpu": med([n / cpu(r) for r in rs if cpu(r) > 0]) if any(cpu(r) > 0 for r in rs) else float("nan"),
        "server": med(server) if has_server else float("nan"),
        "rpcpu_all": med([n / (cpu(r) + sv) for r, sv in zip(rs, server)]) if has_server else float("nan"),
        "rss": med(rss), "loads": load, "e2es": e2e,
        "join": med([r.get("join_s", 0) for r in rs]),
        "pauses": [int(r.get("pauses", 0)) for r in rs],
        "batch_length": rs[0].get("batch_length"),
    }
    broker = [r.get("broker_cpu_s", float("nan")) for r in rs]
    s["broker"] = med(broker) if all(not math.isnan(b) for b in broker) else float("nan")
    if "load_cpu_s" in rs[0]:  # peers: the CPU spent after the first row (start-up left out)
        s["load_cpu"] = med([r["load_cpu_s"] for r in rs])
    return s


def main() -> None:
    path, n, payload, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    sink, description, note, notes_file = sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8]
    target = sys.argv[9] if len(sys.argv) > 9 else ""
    rows = parse(path)
    med = statistics.median
    entries = []
    for r in rows:
        if r["entry"] not in entries:
            entries.append(r["entry"])
    kind = {r["entry"]: r["kind"] for r in rows}


    summary = {e: summarize([r for r in rows if r["entry"] == e], kind[e], n, payload) for e in entries}

    def fmt(x, spec):
        return format(x, spec) if not (isinstance(x, float) and math.isnan(x)) else "-".rjust(int(spec.lstrip("<>").split(".")[0].split(",")[0]))

    print()
    print(f"== sink_bench: {sink}  ({datetime.date.today().isoformat()})")
    print(f"   {n} records, {payload / 1e6:.1f} MB payload ({payload / n:.0f} B/record avg), 1 partition, "
          f"{runs} run(s) each, medians; {note}")
    if description:
        print(f"   {description}")
    for line in open(notes_file):
        if line.strip():
            print(f"   {line.rstrip()}")
    print()
    hdr = (f"{'entry':<24}{'load s':>8}{'records/s':>11}{'MB/s':>7}{'e2e s':>8}{'CPU s':>7}{'rec/CPU-s':>11}"
           f"{'srv CPU s':>10}{'rec/CPU-s+srv':>14}{'RSS MB':>8}{'brk CPU s':>10}   runs (load s)")
    print(hdr)
    print("-" * len(hdr))
    for e in entries:
        s = summary[e]
        print(f"{e:<24}{s['load']:>8.2f}{s['rps']:>11,.0f}{s['mbps']:>7.1f}{s['e2e']:>8.2f}{s['cpu']:>7.2f}"
              f"{fmt(s['rpcpu'], '>11,.0f')}{fmt(s['server'], '>10.2f')}{fmt(s['rpcpu_all'], '>14,.0f')}"
              f"{s['rss']:>8.1f}{fmt(s['broker'], '>10.2f')}   {' '.join(f'{w:.2f}' for w in s['loads'])}")
    loads = [r["load1"] for r in rows if isinstance(r.get("load1"), float)]
    if loads:
        print(f"machine load average (1 min) as the runs started: median {med(loads):.1f}, "
              f"range {min(loads):.1f}-{max(loads):.1f} ({len(loads)} runs)")
    print()
    print("load s: picomq from partition assigned (first record consumed) to last offset committed; baselines")
    print("process start to exit; peers first row to last row. e2e s: from process start. CPU s: the client")
    print("(runtime / psql / peer JVM); srv CPU s: the destination server's processes over the same interval;")
    print("brk CPU s: the Kafka broker's over the run (fetches, commits, the group; picomq's includes the")
    print("bench helper's committed-offset polls, ~1 ms of broker CPU each).")
    picomq = [e for e in entries if kind[e] == "picomq"]
    for e in picomq:
        s = summary[e]
        print(f"{e}: group join {s['join']:.2f} s (median); back-pressure pauses per run: "
              f"{' '.join(str(p) for p in s['pauses'])}")
    baselines = [e for e in entries if kind[e] == "baseline"]
    peers = [e for e in entries if kind[e] == "peer"]
    if baselines:
        print()
        print("ratios, picomq / baseline: records/s (load | end to end), and records per CPU-second with the")
        print("server's CPU included (client + server) [client only]:")
        for e in picomq + peers:
            p = summary[e]
            for b in baselines:
                q = summary[b]
                eff = p["rpcpu_all"] / q["rpcpu_all"] if not math.isnan(p["rpcpu_all"]) else float("nan")
                eff_c = p["rpcpu"] / q["rpcpu"]
                print(f"  {e:<22} vs {b:<22} {p['rps'] / q['rps']:>5.2f} | {p['rps_e2e'] / q['rps_e2e']:>4.2f}   "
                      f"CPU efficiency {fmt(eff, '>4.2f')} [{eff_c:.2f}]")
    if peers:
        print()
        print("picomq / peer (records per client CPU-second; peak RSS):")
        for e in picomq:
            for pe in peers:
                p, q = summary[e], summary[pe]
                print(f"  {e:<22} vs {pe:<22} records/s {p['rps'] / q['rps']:.2f}, rec/CPU-s {p['rpcpu']:,.0f} vs "
                      f"{q['rpcpu']:,.0f} ({p['rpcpu'] / q['rpcpu']:.1f}x), RSS {p['rss']:.0f} vs {q['rss']:.0f} MB")
                if "load_cpu" in q and q["load_cpu"] > 0:
                    print(f"  {'':<22}    {pe}: {q['cpu']:.2f} CPU-s including JVM start-up, {q['load_cpu']:.2f} after "
                          f"its first row ({n / q['load_cpu']:,.0f} rec/CPU-s; picomq/peer {p['rpcpu'] / (n / q['load_cpu']):.1f}x)")
    if target and ":" in target:
        b, want = target.split(":")
        want = float(want)
        if b in summary:
            print()

            def load_of(r):
                return r["wall_s"] - r.get("join_s", 0) if r["kind"] != "baseline" else r["wall_s"]

            for e in picomq:
                got = summary[e]["rps"] / summary[b]["rps"]
                verdict = "met" if got >= want else "NOT met"
                # The same ratio within each round (the two runs close in time), which is less
                # exposed to a machine whose load changes during the benchmark.
                per_round = []
                for run in sorted({r["run"] for r in rows}):
                    pe = [load_of(r) for r in rows if r["entry"] == e and r["run"] == run]
                    pb = [load_of(r) for r in rows if r["entry"] == b and r["run"] == run]
                    if pe and pb:
                        per_round.append(pb[0] / pe[0])
                rounds = (f"; per round {' '.join(f'{x:.2f}' for x in per_round)} (median {med(per_round):.2f})"
                          if len(per_round) > 1 else "")
                print(f"target: {e} >= {want:g} x {b} (records/s, load): {got:.2f}{rounds} -> {verdict}")


if __name__ == "__main__":
    main()
