#!/usr/bin/env python3
"""Prints the summary of bench/planes.sh from its raw results.

    planes_report.py RESULTS EXPORT N PAYLOAD_BYTES RUNS MACHINE_NOTE

RESULTS has one line per runtime run: "plane=<rows|batches|arrow> run=<i> key=value ..."
(bench_helper's output, plus the sink's report). EXPORT has bench_arrow_export's lines:
"export_cost mode=<parse|parsed|export|export_unvalidated|export_declared> key=value ...". Every figure in the table is
the median over the runs of that plane.
"""
import datetime
import statistics
import sys

PLANES = ["rows", "batches", "arrow"]


def value(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def parse_results(path):
    rows = []
    for line in open(path):
        fields = dict(kv.split("=", 1) for kv in line.split())
        if "plane" in fields:
            rows.append({k: value(v) for k, v in fields.items()})
    return rows


def parse_export(path):
    out = {}
    for line in open(path):
        parts = line.split()
        if not parts or parts[0] != "export_cost":
            continue
        fields = {k: value(v) for k, v in (kv.split("=", 1) for kv in parts[1:])}
        out[fields["mode"]] = fields
    return out


def main() -> None:
    results, export_path = sys.argv[1], sys.argv[2]
    n, payload, runs, note = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    rows = parse_results(results)
    export = parse_export(export_path)
    med = statistics.median

    summary = {}
    for p in PLANES:
        rs = [r for r in rows if r["plane"] == p]
        if not rs:
            continue
        walls = [r["wall_s"] for r in rs]
        cpus = [r["user_s"] + r["sys_s"] for r in rs]
        summary[p] = {
            "wall": med(walls),
            "rps": med([n / w for w in walls]),
            "mbps": med([payload / w / 1e6 for w in walls]),
            "cpu": med(cpus),
            "rpcpu": med([n / c for c in cpus if c > 0]) if any(c > 0 for c in cpus) else float("nan"),
            "rss": med([r["maxrss_kb"] / 1024 for r in rs]),
            "join": med([r["join_s"] for r in rs]),
            "first_commit": med([r["first_commit_s"] for r in rs]),
            "rps_x": med([n / (r["wall_s"] - r["join_s"]) for r in rs]),
            "shutdown": med([r["shutdown_s"] for r in rs]),
            "pauses": [int(r.get("pauses", 0)) for r in rs],
            "walls": walls,
            "checksums": sorted({r["sink_checksum"] for r in rs}),
            "bytes": sorted({r["sink_bytes"] for r in rs}),
        }

    print()
    print(f"== one counting sink on each data plane  ({datetime.date.today().isoformat()})")
    print(f"   {n} records, {payload / 1e6:.1f} MB payload ({payload / n:.0f} B/record avg), 1 partition, "
          f"schema = \"json\", {runs} round(s), medians; {note}")
    print()
    hdr = (f"{'plane':<9}{'wall s':>8}{'records/s':>12}{'MB/s':>8}{'CPU s':>8}{'rec/CPU-s':>11}"
           f"{'peak RSS MB':>13}   runs (wall s)")
    print(hdr)
    print("-" * len(hdr))
    for p, s in summary.items():
        print(f"{p:<9}{s['wall']:>8.2f}{s['rps']:>12,.0f}{s['mbps']:>8.1f}{s['cpu']:>8.2f}{s['rpcpu']:>11,.0f}"
              f"{s['rss']:>13.1f}   {' '.join(f'{w:.2f}' for w in s['walls'])}")
    print()
    for p, s in summary.items():
        print(f"{p:<9} group join {s['join']:.2f} s, first commit {s['first_commit']:.2f} s, "
              f"records/s excluding the join {s['rps_x']:,.0f}; shutdown (not in wall) {s['shutdown']:.2f} s; "
              f"pauses per run: {' '.join(map(str, s['pauses']))}")

    pairs = [("batches", "rows"), ("arrow", "batches"), ("arrow", "rows")]
    pairs = [(a, b) for a, b in pairs if a in summary and b in summary]
    if pairs:
        print()
        print("ratios, records/s end to end (process start -> last offset committed):")
        for a, b in pairs:
            x, y = summary[a], summary[b]
            print(f"  {a + ' / ' + b:<17} {x['rps'] / y['rps']:>5.2f}   (excluding group join: "
                  f"{x['rps_x'] / y['rps_x']:.2f})   CPU efficiency (rec/CPU-s) {x['rpcpu'] / y['rpcpu']:.2f}")

    # The sink's own reading: every run of a plane reads the same data, and rows and batches
    # compute the same sums over the same payloads.
    problems = [f"{p}: runs disagree (checksums {s['checksums']})" for p, s in summary.items()
                if len(s["checksums"]) > 1]
    if "rows" in summary and "batches" in summary and summary["rows"]["checksums"] != summary["batches"]["checksums"]:
        problems.append("rows and batches read different sums")
    print()
    print(f"sink reports: every run counted {n} records; "
          + ("checksums consistent across runs, rows = batches" if not problems else "; ".join(problems)))

    if export:
        print()
        rec = next(iter(export.values()))
        print(f"arrow export alone (bench_arrow_export: {rec['records']} records in batches of "
              f"{rec['batch_length']}, no Kafka, one thread, median of {rec['reps']} repetitions):")
        labels = {
            "parsed": "the runtime's path: the decoder's DOM parse + the export reading it",
            "export": "export_batch + release, inferred columns (its own On-Demand pass)",
            "export_unvalidated": "the same, payloads not validated before (DOM parse + split)",
            "export_declared": "export_batch + release, declared columns (arrow_schema)",
            "parse": "simdjson DOM parse of each payload only (the JSON decoder's work)",
        }
        for mode in ("parsed", "export", "export_unvalidated", "export_declared", "parse"):
            if mode in export:
                e = export[mode]
                print(f"  {labels[mode]:<72} {e['ns_per_record']:>7.0f} ns/record {e['mb_per_s']:>7.1f} MB/s")
        if "parsed" in export and "parse" in export:
            ex, pa = export["parsed"]["ns_per_record"], export["parse"]["ns_per_record"]
            print(f"  the arrow plane's own cost on the runtime's path: {ex - pa:.0f} ns/record over the parse every "
                  f"JSON decode pays (values from the DOM, JSON-valued fields' text from stage 1's positions, "
                  f"columns built as records come)")
        if "export" in export and "parse" in export:
            ex, pa = export["export"]["ns_per_record"], export["parse"]["ns_per_record"]
            print(f"  export_batch of validated payloads = {ex / pa:.1f} DOM parses' worth (one On-Demand pass of its "
                  f"own, then the columns)")
        if "export_unvalidated" in export and "parse" in export:
            ex, pa = export["export_unvalidated"]["ns_per_record"], export["parse"]["ns_per_record"]
            print(f"  unvalidated export = {ex / pa:.1f} parses; a DOM parse per payload (~{100 * pa / ex:.0f} % of it), "
                  f"then the JSON-valued fields' text found by a second scan")
        if "export_declared" in export and "parse" in export:
            ex, pa = export["export_declared"]["ns_per_record"], export["parse"]["ns_per_record"]
            print(f"  declared export = {ex / pa:.1f} parses (one On-Demand pass of its own; declared columns do not "
                  f"read the decoder's parse yet)")
        if "parsed" in export and "parse" in export and "arrow" in summary and "batches" in summary:
            extra = (summary["arrow"]["cpu"] - summary["batches"]["cpu"]) / n * 1e9
            own = export["parsed"]["ns_per_record"] - export["parse"]["ns_per_record"]
            print(f"  end to end, arrow costs {extra:,.0f} CPU-ns/record more than batches "
                  f"(the export's own cost alone: {own:.0f} ns/record)")
    print()


if __name__ == "__main__":
    main()
