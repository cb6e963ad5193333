#!/usr/bin/env python3
"""A package's /usr/share/doc/<package>/changelog.gz (Debian Policy 12.7; the packages are native):
one Debian changelog entry for this version, whose items are CHANGELOG.md's for it (its
"## <version>" section, else "## Unreleased"), re-wrapped to the changelog's 80 columns, gzipped
reproducibly (no name, no time in the gzip header). The entry's date is SOURCE_DATE_EPOCH, else
the HEAD commit's time, so two builds of one commit write the same bytes.

    changelog.py --out FILE --source CHANGELOG.md --version 0.1.0 [--maintainer "Name <mail>"]
"""
import argparse
import email.utils
import gzip
import os
import re
import subprocess
import textwrap


def items(markdown, version):
    """The bullets of the version's section (or Unreleased's), each as one line of text."""
    section, out, current = None, [], None
    for line in markdown.splitlines():
        heading = re.match(r"^## (.+)$", line)
        if heading:
            name = heading.group(1).strip()
            if section is not None:
                break
            if name in (version, "Unreleased") or name.startswith(version + " "):
                section = name
            continue
        if section is None:
            continue
        if line.startswith("- "):
            if current:
                out.append(current)
            current = line[2:].strip()
        elif line.startswith("  ") and current is not None:
            current += " " + line.strip()
        elif not line.strip() and current:
            out.append(current)
            current = None
    if current:
        out.append(current)
    return [re.sub(r"\*\*|`", "", i) for i in out]  # plain text: the changelog is not Markdown


def date(source_dir):
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        try:
            epoch = subprocess.run(["git", "-C", source_dir, "log", "-1", "--format=%ct"], check=True,
                                   capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            epoch = "0"
    return email.utils.formatdate(int(epoch or 0), usegmt=False).replace("-0000", "+0000")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--source", required=True, help="CHANGELOG.md")
    ap.add_argument("--version", required=True)
    ap.add_argument("--maintainer", default="picomq-connect maintainers <maintainers@picomq-connect.dev>")
    args = ap.parse_args()
    with open(args.source, encoding="utf-8") as f:
        bullets = items(f.read(), args.version) or ["Release " + args.version + "."]
    body = "\n".join(textwrap.fill(b, width=80, initial_indent="  * ", subsequent_indent="    ",
                                   break_on_hyphens=False) for b in bullets)
    entry = (f"picomq-connect ({args.version}) unstable; urgency=medium\n\n{body}\n\n"
             f" -- {args.maintainer}  {date(os.path.dirname(os.path.abspath(args.source)))}\n")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                    compresslevel=9) as gz:
        gz.write(entry.encode("utf-8"))


if __name__ == "__main__":
    main()
