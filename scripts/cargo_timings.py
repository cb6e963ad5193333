#!/usr/bin/env python3
"""The slowest units of the last `cargo build --timings` (scripts/build.sh, in CI).

    cargo_timings.py TIMINGS_DIR [N]

Reads the newest cargo-timing-*.html in TIMINGS_DIR (cargo writes its units as a JSON array,
`const UNIT_DATA = [...]`) and prints the N slowest (default 12) with their share of the build's
wall time. Prints nothing when there is no such page (timings off, or nothing was compiled).
"""

import glob
import json
import os
import re
import sys


def main():
    directory = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    pages = sorted(glob.glob(os.path.join(directory, "cargo-timing-*.html")), key=os.path.getmtime)
    if not pages:
        return 0
    text = open(pages[-1], encoding="utf-8").read()
    m = re.search(r"const UNIT_DATA = (\[.*?\]);\s*\n", text, re.S)
    if not m:
        return 0
    units = json.loads(m.group(1))
    if not units:
        return 0
    wall = max(u["start"] + u["duration"] for u in units)
    total = sum(u["duration"] for u in units)
    if total < 1:
        return 0  # nothing was compiled
    print("[cargo] %d units, %.0f s of compile in %.0f s of wall time (%s); the slowest:" % (
        len(units), total, wall, os.path.basename(pages[-1])))
    for u in sorted(units, key=lambda u: -u["duration"])[:n]:
        what = u.get("target", "").strip()  # e.g. "build-script"; empty for a library ("mode" says nothing useful)
        print("  %7.1f s  %s %s%s" % (u["duration"], u["name"], u.get("version", ""), (" " + what) if what else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
