#!/usr/bin/env python3
"""The CI clock's report (scripts/clock.sh writes the lines, .ci/run calls this at its end).

    clock_report.py CLOCK_FILE [--previous FILE] [--warm] [--fresh-budget-min 60] [--warm-budget-min 25]

Prints every phase as a tree (start and end as minutes:seconds since the run began, the
duration, nested phases indented under the one they ran in, siblings in start order), the five longest phases that hold
no other, and the fresh-machine budget left. A warm run (--warm: the machine had built and run
this before) over the warm budget gets a loud warning naming the phases that took longer than in
the previous run (--previous, the last run's clock file). It only warns: the exit code is 0
whatever the figures (a slow machine must not cost a submission).
"""

import argparse
import sys


def read(path):
    phases = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 5:
                    continue
                name, start, end, seconds, rc = parts
                phases.append({"name": name, "start": int(start), "end": int(end), "seconds": int(seconds), "rc": int(rc)})
    except OSError:
        pass
    return phases


def mmss(seconds):
    return "%d:%02d" % (seconds // 60, seconds % 60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("clock_file")
    ap.add_argument("--previous")
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--fresh-budget-min", type=float, default=60)
    ap.add_argument("--warm-budget-min", type=float, default=25)
    args = ap.parse_args()

    phases = read(args.clock_file)
    if not phases:
        print("[clock] no phases recorded")
        return 0
    begin = min(p["start"] for p in phases)
    end = max(p["end"] for p in phases)
    total = end - begin
    # As a tree: each phase right under the one it ran in (its name's prefix), siblings in start
    # order (a phase whose parent was not clocked sorts by its own start).
    by_name = {p["name"]: p for p in phases}

    def tree_key(p):
        parts = p["name"].split("/")
        key = []
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            q = by_name.get(prefix, p)
            key.append((q["start"], -q["end"], prefix))
        return key

    phases.sort(key=tree_key)
    width = max(len(p["name"]) for p in phases) + 2
    print("[clock] phases (start and end since the run began, min:s):")
    print("  %-*s %7s %7s %8s" % (width, "phase", "start", "end", "took"))
    for p in phases:
        depth = p["name"].count("/")
        label = "  " * depth + p["name"].rsplit("/", 1)[-1]
        note = "" if p["rc"] == 0 else "  (exit %d)" % p["rc"]
        print("  %-*s %7s %7s %8s%s" % (width, label, mmss(p["start"] - begin), mmss(p["end"] - begin), mmss(p["seconds"]), note))

    names = {p["name"] for p in phases}
    # ("ci" is the whole run, not a phase of it.)
    leaves = [p for p in phases if p["name"] != "ci" and not any(n.startswith(p["name"] + "/") for n in names)]
    print("[clock] the five longest phases:")
    for p in sorted(leaves, key=lambda p: -p["seconds"])[:5]:
        print("  %8s  %s" % (mmss(p["seconds"]), p["name"]))

    budget = args.fresh_budget_min * 60
    print("[clock] total %s; the fresh-machine budget is %d min: %s left%s" % (
        mmss(total), args.fresh_budget_min, mmss(max(0, budget - total)),
        "" if total <= budget else " (OVER by %s)" % mmss(total - budget)))

    if args.warm and total > args.warm_budget_min * 60:
        previous = {p["name"]: p["seconds"] for p in read(args.previous)} if args.previous else {}
        grew = [(p["name"], previous[p["name"]], p["seconds"]) for p in leaves
                if p["name"] in previous and p["seconds"] > previous[p["name"]] * 1.25 and p["seconds"] - previous[p["name"]] >= 30]
        new = [p for p in leaves if previous and p["name"] not in previous and p["seconds"] >= 30]
        bar = "!" * 78
        print(bar)
        print("[clock] WARNING: this warm run took %s, over the warm budget of %d min." % (mmss(total), args.warm_budget_min))
        if grew or new:
            print("[clock] phases that grew since the previous run:")
            for name, before, now in sorted(grew, key=lambda g: g[1] - g[2]):
                print("  %-*s %8s -> %s" % (width, name, mmss(before), mmss(now)))
            for p in new:
                print("  %-*s %8s (new)" % (width, p["name"], mmss(p["seconds"])))
        elif not previous:
            print("[clock] (no previous run's clock to compare with)")
        else:
            print("[clock] no phase grew by a quarter and 30 s: the whole machine is slower")
        print(bar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
