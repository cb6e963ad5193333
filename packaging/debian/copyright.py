#!/usr/bin/env python3
"""A package's /usr/share/doc/<package>/copyright (Debian Policy 12.5), machine-readable
(copyright-format 1.0): picomq-connect's own licence for every file, then what is linked into the
package's binaries statically and so ships inside it: librdkafka (picomq-connect and the
conformance suite) and the Rust crates of a cdylib (the heavy Rust sinks, the kit's Parquet
writer), each crate with its version and licence as its Cargo.toml declares them (cargo metadata,
offline: run after the build). Libraries linked dynamically come from Debian packages, which
carry their own copyright files.

    copyright.py --out FILE [--rdkafka FILE_IN_PACKAGE --rdkafka-licenses LICENSES.txt]
                 [--crate CRATE=FILE_IN_PACKAGE]...
                 [--cargo CARGO --manifest Cargo.toml]
"""
import argparse
import json
import subprocess
import sys

HEADER = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: picomq-connect
Source: https://github.com/picomq/picomq-connect

Files: *
Copyright: 2026 the picomq-connect authors
License: Apache-2.0
"""

APACHE = """License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0 can be found in
 /usr/share/common-licenses/Apache-2.0.
"""

CRATES_LICENCES = """License: crates-licences
 Each Rust crate listed above is under the licence its entry names (an SPDX expression, as the
 crate's Cargo.toml declares it); the licence texts are in the crates' sources on crates.io.
"""


def dep5_text(text):
    """Free text as a copyright-format field continuation: each line indented, blank lines as ' .'."""
    return "\n".join(" " + line if line.strip() else " ." for line in text.rstrip().splitlines())


def rdkafka_paragraphs(path, licenses):
    return f"""Files: {path}
Copyright: 2012-2022, Magnus Edenhill; 2023, Confluent Inc.; and the authors of the code librdkafka bundles
License: librdkafka
Comment: librdkafka 2.12.1, linked statically.

License: librdkafka
{dep5_text(open(licenses, encoding="utf-8").read())}
"""


def linked_crates(cargo, manifest, crate):
    """(name, version, license) of every crate `crate` links (normal dependencies, Linux), itself left out."""
    meta = json.loads(subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--locked", "--offline", "--manifest-path", manifest,
         "--filter-platform", "x86_64-unknown-linux-gnu"],
        check=True, capture_output=True, text=True).stdout)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = next((p["id"] for p in meta["packages"] if p["name"] == crate and p["source"] is None), None)
    if root is None:
        sys.exit(f"copyright.py: no crate '{crate}' in the workspace of {manifest}")
    seen, todo = set(), [root]
    while todo:
        node = nodes[todo.pop()]
        for dep in node["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    crates = [packages[i] for i in seen if packages[i]["source"] is not None]  # the workspace's own: Apache-2.0
    return sorted((p["name"], p["version"], p.get("license") or "see the crate's license file") for p in crates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rdkafka", help="the file of the package that links librdkafka statically")
    ap.add_argument("--rdkafka-licenses", help="librdkafka's LICENSES.txt (its licence and those of the code it bundles)")
    ap.add_argument("--crate", action="append", default=[], help="CRATE=FILE: a cdylib of the workspace in the package")
    ap.add_argument("--cargo", default="cargo")
    ap.add_argument("--manifest")
    args = ap.parse_args()
    parts = [HEADER]
    if args.rdkafka:
        parts.append(rdkafka_paragraphs(args.rdkafka, args.rdkafka_licenses))
    for spec in args.crate:
        crate, _, path = spec.partition("=")
        crates = linked_crates(args.cargo, args.manifest, crate)
        lines = "\n".join(f" {name} {version}: {lic}" for name, version, lic in crates)
        parts.append(f"""Files: {path}
Copyright: 2026 the picomq-connect authors; the authors of the Rust crates below
License: Apache-2.0 and crates-licences
Comment: {len(crates)} Rust crates are linked statically into this file (crate version: its licence, an
 SPDX expression, as its Cargo.toml declares it; the licence texts are in each crate's sources on
 crates.io):
{lines}
""")
    parts.append(APACHE)
    if args.crate:
        parts.append(CRATES_LICENCES)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
