"""chDB (ClickHouse 26.x, in-process) as an independent, current parser of what the ClickHouse sink
sends. Used by golden_test.cpp:

  chdb_golden.py parse <body file> <structure> [RowBinary|Native]
      prints the rows ClickHouse reads from a RowBinary (or Native) body with that structure, as JSONEachRow
      (64-bit integers as numbers), or exits 1 with ClickHouse's error on stderr.
  chdb_golden.py dedup <body file> <row boundaries, comma-separated byte offsets> <structure>
      shows the insert-deduplication semantics of current servers on a MergeTree with
      non_replicated_deduplication_window: the same body twice with the same
      insert_deduplication_token, then the same rows cut into two inserts (other tokens), into a
      plain MergeTree and a ReplacingMergeTree ordered by the record id; prints one JSON object of
      row counts.
  chdb_golden.py changes <create table sql, table d.t> <structure> <body file>...
      runs the sink's CREATE TABLE of a table of change events, inserts each RowBinary body in the
      order given, and prints the table read with FINAL (every row, deleted flags included) as
      JSONEachRow, before and after OPTIMIZE ... FINAL, as {"final": [...], "optimized": [...]}.
"""
import json
import os
import sys
import tempfile

import chdb
from chdb import session as chs


def literal(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def parse(body, structure, fmt="RowBinary"):
    sql = (f"SELECT * FROM file({literal(body)}, {literal(fmt)}, {literal(structure)}) "
           "SETTINGS output_format_json_quote_64bit_integers = 0, output_format_json_quote_64bit_floats = 0")
    try:
        out = chdb.query(sql, "JSONEachRow")
    except Exception as e:  # chdb raises on a ClickHouse error
        print(str(e), file=sys.stderr)
        return 1
    sys.stdout.write(str(out))
    return 0


def dedup(body, boundaries, structure):
    data = open(body, "rb").read()
    cuts = [int(x) for x in boundaries.split(",") if x]
    half = cuts[len(cuts) // 2 - 1] if len(cuts) > 1 else len(data)
    d = tempfile.mkdtemp(prefix="chdb-dedup-")
    s = chs.Session(d)
    results = {}
    try:
        s.query("CREATE DATABASE g")
        for engine in ("MergeTree", "ReplacingMergeTree"):
            t = f"g.{engine.lower()}"
            s.query(f"CREATE TABLE {t} ({structure}) ENGINE = {engine} ORDER BY (pico_topic, pico_partition, pico_offset) "
                    "SETTINGS non_replicated_deduplication_window = 100")

            def insert(part, token):
                path = os.path.join(d, "part.bin")
                open(path, "wb").write(part)
                s.query(f"INSERT INTO {t} SELECT * FROM file({literal(path)}, 'RowBinary', {literal(structure)}) "
                        f"SETTINGS insert_deduplication_token = '{token}'")

            insert(data, "topic-0-0-end")
            insert(data, "topic-0-0-end")  # a resend with the same token: dropped
            same = int(str(s.query(f"SELECT count() FROM {t}", "CSV")).strip())
            insert(data[:half], "topic-0-0-mid")  # a replay cut differently: other tokens
            insert(data[half:], "topic-0-mid-end")
            recut = int(str(s.query(f"SELECT count() FROM {t}", "CSV")).strip())
            final = int(str(s.query(f"SELECT count() FROM {t} FINAL", "CSV")).strip()) if engine != "MergeTree" else None
            results[engine] = {"after_same_token_twice": same, "after_recut_replay": recut, "final": final}
    finally:
        s.close()
    results["version"] = str(chdb.query("SELECT version()", "CSV")).strip().strip('"')
    print(json.dumps(results))
    return 0


def changes(create_sql, structure, bodies):
    d = tempfile.mkdtemp(prefix="chdb-changes-")
    s = chs.Session(d)
    try:
        s.query("CREATE DATABASE d")
        s.query(create_sql)
        for body in bodies:
            s.query(f"INSERT INTO d.t SELECT * FROM file({literal(body)}, 'RowBinary', {literal(structure)})")

        def rows():
            out = str(s.query("SELECT * FROM d.t FINAL ORDER BY tuple(*) "
                              "SETTINGS output_format_json_quote_64bit_integers = 0", "JSONEachRow"))
            return [json.loads(line) for line in out.splitlines() if line.strip()]

        final = rows()
        s.query("OPTIMIZE TABLE d.t FINAL")
        print(json.dumps({"final": final, "optimized": rows(),
                          "version": str(s.query("SELECT version()", "CSV")).strip().strip('"')}))
    finally:
        s.close()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "parse":
        sys.exit(parse(*sys.argv[2:5]))
    if sys.argv[1] == "dedup":
        sys.exit(dedup(sys.argv[2], sys.argv[3], sys.argv[4]))
    if sys.argv[1] == "changes":
        sys.exit(changes(sys.argv[2], sys.argv[3], sys.argv[4:]))
    sys.exit(2)
