#!/usr/bin/env python3
"""Docs that run: every ```toml example in README.md and docs/, and every definition shown in the
Helm chart's values.yaml comments, goes through `picomq-connect --check`.
  - a sink definition (type = "sink", or a `path` naming a plugin) is checked as a file of a
    sinks directory, under a runtime config naming the build's plugins;
  - a runtime config ([broker] / [broker.embedded] / [sinks]) is checked as the runtime config, its
    sinks directory made empty where it does not exist;
  - a fragment is checked on top of a base: a [plugin_config] table replaces the plugin_config of the
    page's first definition; [[topics]] blocks or a [[transforms]] chain join a stdout definition;
    an [api] / [runtime] / [broker...] table joins a runtime config. A fragment that is only an
    expression (inline tables a page explains) is parsed as TOML, nothing more.
Every definition then runs its fixtures with `picomq-connect test` (docs/testing-definitions.md):
tests/docs/fixtures/<page under docs/, without .md>/<key>.toml (<key>.2.toml for a page's second definition of
that key); a definition without one fails. A block with [[tests]] is a fixture itself, run against
the page's latest definition.
${ENV} references are set to placeholders. Prints each example's verdict; exits 1 on any failure.
Usage: docs_examples_test.py PICOMQ_CONNECT PLUGIN_DIR"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib

CONNECT, PLUGINS = sys.argv[1:3]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STDOUT_DEF = 'type = "sink"\nkey = "docs_base"\nversion = 0\npath = "libpicomq_connector_stdout_sink"\n'
RUNTIME = f'[broker]\nbootstrap_servers = "127.0.0.1:9092"\n[plugins]\npath = ["{PLUGINS}"]\n[sinks]\ndir = "sinks.d"\n'

def env_for(text):
    env = dict(os.environ, AWS_ACCESS_KEY_ID="placeholder", AWS_SECRET_ACCESS_KEY="placeholder")
    for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text):
        env.setdefault(name, "placeholder")
    return env

def kind(block):
    if re.search(r'^type\s*=\s*"sink"', block, re.M) or re.search(r'^path\s*=\s*"lib', block, re.M):
        return "definition"
    if re.search(r"^\[(broker|sinks|plugins)(\]|\.)", block, re.M) and not re.search(r"^\[\[topics\]\]", block, re.M):
        return "runtime"
    return "fragment"

def check_runtime(runtime_text, definitions):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "sinks.d"))
        for name, text in definitions:
            open(os.path.join(d, "sinks.d", name), "w").write(text)
        # A runtime config's own folders (sinks dir, seed files) exist where the example says.
        for key in re.findall(r'^dir\s*=\s*"([^"]+)"', runtime_text, re.M):
            if not key.startswith("/"):
                os.makedirs(os.path.join(d, key), exist_ok=True)
        for seed in re.findall(r'^file\s*=\s*"([^"/]+)"', runtime_text, re.M):
            open(os.path.join(d, seed), "w").write('{"a": 1}\n')
        path = os.path.join(d, "runtime.toml")
        open(path, "w").write(runtime_text)
        r = subprocess.run([CONNECT, "--config", path, "--check"], capture_output=True, text=True,
                           env=env_for(runtime_text + "".join(t for _, t in definitions)))
        return r.returncode == 0, (r.stdout + r.stderr).strip()

def with_plugins(runtime_text):
    # The build's plugins, searched first (the example's own [plugins] path stays after them).
    if re.search(r"^\[plugins\]", runtime_text, re.M):
        return re.sub(r"^\[plugins\]\n(path\s*=\s*\[)", lambda m: f'[plugins]\n{m.group(1)}"{PLUGINS}", ', runtime_text, flags=re.M)
    return runtime_text + f'\n[plugins]\npath = ["{PLUGINS}"]\n'

FIXTURES = os.path.join(ROOT, "tests", "docs", "fixtures")

def run_fixture(definition, fixture, no_plugin=False):
    """`picomq-connect test` of `fixture` (a file) on `definition` (TOML text)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "definition.toml")
        open(path, "w").write(definition)
        args = [CONNECT, "test", "--definition", path] + (["--no-plugin"] if no_plugin else ["--plugins", PLUGINS]) + [fixture]
        r = subprocess.run(args, capture_output=True, text=True, env=env_for(definition))
        return r.returncode == 0, (r.stdout + r.stderr).strip()

def fixture_of(rel, key, seen):
    """The fixture file of the page's definition `key` (counting the page's earlier ones)."""
    seen[key] = seen.get(key, 0) + 1
    name = key + ("" if seen[key] == 1 else f".{seen[key]}") + ".toml"
    page = os.path.splitext(rel)[0]
    return os.path.join(FIXTURES, page[len("docs/"):] if page.startswith("docs/") else page, name)

def python_module_only(block, out):
    """A Python sink's example: --check imports its class (the reader's module, not in this tree),
    so the errors about where the class comes from are expected; any other error still fails."""
    if not re.search(r'^path\s*=\s*"libpicomq_connector_python_sink"', block, re.M):
        return False
    errors = [l for l in out.splitlines() if l.startswith("error:")]
    return bool(errors) and all(re.search(r"key 'plugin_config\.(class|python_path|virtualenv)'", l) for l in errors)

def replace_plugin_config(definition, fragment):
    head = re.split(r"^\[plugin_config", definition, maxsplit=1, flags=re.M)[0]
    return head.rstrip() + "\n\n" + fragment

files = ["README.md"] + sorted(os.path.relpath(f, ROOT) for f in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
failures, count = [], 0
for rel in files:
    text = open(os.path.join(ROOT, rel)).read()
    first_definition = latest_definition = None
    keys_seen = {}
    waiting = None  # (where, fixture path) of a definition whose fixture may come later on its page
    for m in re.finditer(r"```toml\n(.*?)```", text, re.S):
        block, line = m.group(1), text[: m.start()].count("\n") + 1
        where = f"{rel}:{line}"
        count += 1
        conditions = [l for l in block.splitlines() if l.strip() and not l.lstrip().startswith("#")]
        if conditions and all(l.startswith("when = ") for l in conditions):
            # A list of `when` conditions: each one a filter's drop_when on a stdout definition.
            base = STDOUT_DEF + '[[topics]]\ntopics = ["orders"]\n'
            defs = [(f"c{i}.toml", base.replace("docs_base", f"docs_c{i}") + '[[transforms]]\ntype = "filter"\ndrop_' + c + "\n")
                    for i, c in enumerate(conditions)]
            ok, out = check_runtime(RUNTIME, defs)
            print(("ok   " if ok else "FAIL ") + f"{where} ({len(conditions)} conditions)" + ("" if ok else "\n     | " + out.replace("\n", "\n     | ")))
            if not ok:
                failures.append(where)
            continue
        k = kind(block)
        try:
            tomllib.loads(block.replace("...", "x"))
        except tomllib.TOMLDecodeError as e:
            if k != "fragment" or "=" in block.splitlines()[0]:
                failures.append(where)
                print(f"FAIL {where}: not TOML: {e}")
                continue
        if re.search(r"^\[\[tests\]\]", block, re.M):
            if not latest_definition:
                failures.append(where)
                print(f"FAIL {where}: a fixture with no definition before it on the page")
                continue
            waiting = None
            with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
                f.write(block)
                f.flush()
                ok, out = run_fixture(latest_definition, f.name)
            print(("ok   " if ok else "FAIL ") + f"{where} (fixture of the definition above it)" + ("" if ok else "\n     | " + out.replace("\n", "\n     | ")))
            if not ok:
                failures.append(where)
            continue
        if k == "definition" and waiting:
            failures.append(waiting[0])
            print(f"FAIL {waiting[0]}: no fixture: write {waiting[1]} or a [[tests]] block after it (docs/testing-definitions.md)")
        if k == "definition":
            waiting = None
            first_definition = first_definition or block
            latest_definition = block
            ok, out = check_runtime(RUNTIME, [("example.toml", block)])
            python_only = not ok and python_module_only(block, out)
            key = re.search(r'^key\s*=\s*"([^"]+)"', block, re.M)
            fixture = fixture_of(rel, key.group(1) if key else "", keys_seen)
            if ok or python_only:
                if not os.path.exists(fixture):
                    # Its fixture may be a [[tests]] block further down the page.
                    waiting = (where, os.path.relpath(fixture, ROOT))
                    continue
                else:
                    ok, out = run_fixture(block, fixture, no_plugin=python_only)
                    out = f"{os.path.relpath(fixture, ROOT)}:\n{out}"
            if ok:
                print(f"ok   {where} (definition, {os.path.relpath(fixture, ROOT)})")
                continue
        elif k == "runtime":
            # A part of a runtime config (the page shows the tables it is about): the rest added.
            full = block if re.search(r"^\[sinks\]", block, re.M) else block + '\n[sinks]\ndir = "sinks.d"\n'
            ok, out = check_runtime(with_plugins(full), [])
        elif re.search(r"^\[plugin_config", block, re.M) and first_definition:
            ok, out = check_runtime(RUNTIME, [("example.toml", replace_plugin_config(first_definition, block))])
        elif re.search(r"^\[\[(topics|transforms)\]\]", block, re.M):
            base = STDOUT_DEF + ("" if re.search(r"^\[\[topics\]\]", block, re.M) else '[[topics]]\ntopics = ["orders"]\n')
            ok, out = check_runtime(RUNTIME, [("example.toml", base + block)])
        elif re.search(r"^\[(api|runtime|broker)", block, re.M):
            ok, out = check_runtime(RUNTIME.replace("[sinks]", block + "\n[sinks]", 1), [])
        else:
            print(f"ok   {where}: a TOML expression the page explains (parsed only)")
            continue
        print(("ok   " if ok else "FAIL ") + f"{where} ({k})" + ("" if ok else "\n     | " + out.replace("\n", "\n     | ")))
        if not ok:
            failures.append(where)

    if waiting:
        failures.append(waiting[0])
        print(f"FAIL {waiting[0]}: no fixture: write {waiting[1]} or a [[tests]] block after it (docs/testing-definitions.md)")

# The chart's values.yaml shows definitions in comments (`#  name.toml: |` and the TOML indented
# under it): each is checked as a definition too.
for values in sorted(glob.glob(os.path.join(ROOT, "deploy", "helm", "*", "values.yaml"))):
    rel = os.path.relpath(values, ROOT)
    lines = open(values).read().splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"#(\s+)[\w.-]+\.toml: \|\s*$", l)
        if not m:
            continue
        indent = len(m.group(1))
        body = []
        for nxt in lines[i + 1:]:
            inner = re.match(r"#( *)(.*)$", nxt)
            if not inner or (inner.group(2) and len(inner.group(1)) <= indent):
                break
            body.append(nxt[1 + indent + 2:] if inner.group(2) else "")
        block = "\n".join(body).strip() + "\n"
        where = f"{rel}:{i + 1}"
        count += 1
        ok, out = check_runtime(RUNTIME, [("example.toml", block)])
        print(("ok   " if ok else "FAIL ") + f"{where} (definition in a comment)" + ("" if ok else "\n     | " + out.replace("\n", "\n     | ")))
        if not ok:
            failures.append(where)

print(f"{count} TOML examples, {len(failures)} failing")
sys.exit(1 if failures else 0)
