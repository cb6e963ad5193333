#!/usr/bin/env python3
"""Which sources clang-tidy must look at again (scripts/style.sh).

A source passed clang-tidy before if nothing its result depends on changed: clang-tidy's version,
the .clang-tidy files above it, its compile command (the clone's folder taken out) and the content
of every file its translation unit reads (the source and each header, from the build's dependency
log, `ninja -t deps`). Each pass is kept as an empty file named by that key in the cache folder, so
a warm CI run checks only what a change reached.

  tidy_cache.py <build dir> <compile db> <cache dir> <source>...
prints `<source>\t<cache file>` for each source without a recorded pass (its key unknown: no
dependency log for it yet, so it is checked).
"""
import hashlib
import json
import os
import re
import subprocess
import sys


def dependency_log(build_dir):
    """object (as ninja names it) -> the files it was compiled from."""
    out = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True).stdout
    deps, current = {}, None
    for line in out.splitlines():
        if line and not line[0].isspace():
            current = line.split(":", 1)[0] if "(VALID)" in line else None
            if current:
                deps[current] = []
        elif current and line.strip():
            deps[current].append(line.strip())
    return deps


def main():
    build_dir, db_path, cache_dir, sources = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    root = os.getcwd()
    build_abs = os.path.abspath(build_dir)
    os.makedirs(cache_dir, exist_ok=True)
    tidy_version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    commands = {}
    with open(db_path) as db:
        for entry in json.load(db):
            commands[os.path.relpath(entry["file"], root)] = entry
    deps = dependency_log(build_dir)
    digests = {}

    def digest(path):
        if path not in digests:
            try:
                with open(path, "rb") as f:
                    digests[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                digests[path] = "missing"
        return digests[path]

    for source in sources:
        entry = commands.get(source)
        match = re.search(r" -o (\S+)", entry["command"]) if entry else None
        obj = match and match.group(1)
        if obj and obj not in deps:  # ninja names objects relative to the build folder
            obj = os.path.relpath(os.path.join(entry["directory"], obj), build_abs)
        files = deps.get(obj) if obj else None
        if not files:
            print(f"{source}\t")
            continue
        key = hashlib.sha256()
        key.update(tidy_version.encode())
        folder = os.path.dirname(os.path.abspath(source))
        while folder.startswith(root):
            config = os.path.join(folder, ".clang-tidy")
            if os.path.exists(config):
                key.update(config.replace(root, "").encode() + digest(config).encode())
            folder = os.path.dirname(folder)
        key.update(entry["command"].replace(root, "<clone>").encode())
        for f in files:
            path = f if os.path.isabs(f) else os.path.join(build_abs, f)
            key.update(path.replace(root, "<clone>").encode() + digest(path).encode())
        cached = os.path.join(cache_dir, key.hexdigest())
        if not os.path.exists(cached):
            print(f"{source}\t{cached}")


if __name__ == "__main__":
    main()
