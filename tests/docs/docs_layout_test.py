#!/usr/bin/env python3
"""The docs' shape: every sink page under one skeleton of section names, every page in the index.

  - docs/sinks/<sink>.md (a page of a sink: it names a plugin `path = "lib..."` in its first lines)
    has `## Summary` first and `## plugin_config` second; somewhere after them
    `## Behaviour under replay...` and `## Errors...` (a heading may go on: "Errors (SQLSTATE)");
    then `## Tested against`, and after it only `## Counters`, `## Speed`, `## Not done yet...`,
    in that order, each at most once. What a sink needs beyond that goes between plugin_config
    and Tested against.
  - docs/README.md links every page of docs/ and docs/sinks/.
Prints each problem with its file; exits 1 on any.
Usage: docs_layout_test.py [REPO_ROOT]"""
import glob
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TAIL = ["Tested against", "Counters", "Speed", "Not done yet"]


def named(heading, name):
    return heading == name or re.match(re.escape(name) + r"[ :,(]", heading) is not None


def sink_page_problems(text):
    headings = re.findall(r"^## (.+?)\s*$", text, re.M)
    problems = []
    if headings[:2] != ["Summary", "plugin_config"]:
        problems.append(f"begins with {headings[:2]}, not ['Summary', 'plugin_config']")
    for name in ["Behaviour under replay", "Errors", "Tested against"]:
        if not any(named(h, name) for h in headings):
            problems.append(f"has no '## {name}' section")
    tail_at = next((i for i, h in enumerate(headings) if named(h, "Tested against")), None)
    if tail_at is not None:
        order = []
        for h in headings[tail_at:]:
            kind = next((t for t in TAIL if named(h, t)), None)
            if kind is None:
                problems.append(f"'## {h}' comes after 'Tested against' (only {', '.join(TAIL[1:])} may)")
            else:
                order.append(TAIL.index(kind))
        if order != sorted(set(order)):
            problems.append(f"the closing sections are not in the order {TAIL} (or one is repeated)")
    return problems


def main():
    failures = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "sinks", "*.md"))):
        text = open(path, encoding="utf-8").read()
        if not re.search(r'`path = "libpicomq_connector_\w+"`', "\n".join(text.splitlines()[:8])):
            continue  # a sub-page (postgres-encoding.md)
        for problem in sink_page_problems(text):
            print(f"{os.path.relpath(path, ROOT)}: {problem}")
            failures += 1
    index = open(os.path.join(ROOT, "docs", "README.md"), encoding="utf-8").read()
    linked = set(re.findall(r"\]\(([^)#]+\.md)", index))
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")) + glob.glob(os.path.join(ROOT, "docs", "sinks", "*.md"))):
        rel = os.path.relpath(path, os.path.join(ROOT, "docs"))
        if rel != "README.md" and rel not in linked:
            print(f"docs/README.md: does not link {rel}")
            failures += 1
    print(f"docs layout: {failures} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
