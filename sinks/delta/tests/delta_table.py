"""The Delta sink's independent reader and second writer: the `deltalake` package from PyPI
(delta-rs' Python binding, with pyarrow), never the sink's own code.

  delta_table.py create <uri> [key=value ...]     an empty table with the tests' schema
  delta_table.py create-conformance <uri> [...]   an empty table for the conformance suite (every
                                                  metadata column, its payload fields)
  delta_table.py create-with <uri> <fields> [...]  an empty table of these columns: a JSON list of
                                                  [name, type, nullable] (types: int32, int64,
                                                  string, timestamp, float64), e.g. for the change
                                                  events' keyed tables
  delta_table.py txn <uri> [key=value ...]        {"version", "files", "txn": {appId: version}}
                                                  (the appIds in APP_IDS)
  delta_table.py dump <uri> [key=value ...]       every row, every column: {"rows": [...]}, bytes
                                                  as base64, maps as objects
  delta_table.py read <uri> [key=value ...]       {"version", "rows": [...], "txn": {appId: version}}
  delta_table.py append <uri> <n> [key=value ...] a second writer's commit (write_deltalake append)
  delta_table.py commit-as <uri> <app_id> <topic> <partition>:<from>:<to> ... [key=value ...]
                                                  the commit a run of the sink with this app_id
                                                  would make (a killed run's, landing late): the
                                                  rows of offsets [from, to) of each partition
                                                  (n = partition * 1000 + offset, s = "late") and
                                                  one txn action <app_id>-<topic>-<partition> =
                                                  <to> each

key=value pairs are storage options (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).
"""
import base64
import datetime
import json
import os
import sys

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

SCHEMA = pa.schema([
    pa.field("pico_topic", pa.string(), nullable=False),
    pa.field("pico_partition", pa.int32(), nullable=False),
    pa.field("pico_offset", pa.int64(), nullable=False),
    pa.field("pico_timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("pico_key", pa.binary()),
    pa.field("n", pa.int64()),
    pa.field("s", pa.string()),
])


# The conformance suite's payloads: {"n", "s"}, and the hostile-names case's {"q", "u"}.
CONFORMANCE_SCHEMA = pa.schema([
    *[f for f in SCHEMA if f.name.startswith("pico_")],
    pa.field("pico_headers", pa.map_(pa.string(), pa.binary())),
    pa.field("n", pa.int64()),
    pa.field("s", pa.string()),
    pa.field("q", pa.string()),
    pa.field("u", pa.string()),
])


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def plain(value):
    """A cell as JSON: bytes as base64, maps (lists of pairs) as objects."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return {k: plain(v) for k, v in value}
    if isinstance(value, datetime.datetime):  # epoch ms, exactly (no float on the way)
        return (value - EPOCH) // datetime.timedelta(milliseconds=1)
    return value


def storage(args):
    return dict(a.split("=", 1) for a in args) or None


def main():
    cmd, uri, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if cmd in ("create", "create-conformance"):
        schema = CONFORMANCE_SCHEMA if cmd == "create-conformance" else SCHEMA
        DeltaTable.create(uri, schema=schema, storage_options=storage(rest))
        print(json.dumps({"created": uri}))
    elif cmd == "create-with":
        types = {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string(), "float64": pa.float64(),
                 "timestamp": pa.timestamp("us", tz="UTC")}
        schema = pa.schema([pa.field(n, types[t], nullable=bool(null)) for n, t, null in json.loads(rest[0])])
        DeltaTable.create(uri, schema=schema, storage_options=storage(rest[1:]))
        print(json.dumps({"created": uri}))
    elif cmd == "txn":
        dt = DeltaTable(uri, storage_options=storage(rest))
        print(json.dumps({"version": dt.version(), "files": len(dt.file_uris()),
                          "txn": {app_id: dt.transaction_version(app_id) for app_id in app_ids()}}))
    elif cmd == "dump":
        t = DeltaTable(uri, storage_options=storage(rest)).to_pyarrow_table()
        rows = [{k: plain(v) for k, v in r.items()} for r in t.to_pylist()]
        print(json.dumps({"rows": rows}))
    elif cmd == "append":
        n, opts = int(rest[0]), storage(rest[1:])
        table = pa.table({
            "pico_topic": pa.array(["second-writer"] * n, pa.string()),
            "pico_partition": pa.array([0] * n, pa.int32()),
            "pico_offset": pa.array(range(n), pa.int64()),
            "pico_timestamp": pa.array([None] * n, pa.timestamp("us", tz="UTC")),
            "pico_key": pa.array([None] * n, pa.binary()),
            "n": pa.array([-1] * n, pa.int64()),
            "s": pa.array(["other"] * n, pa.string()),
        }, schema=SCHEMA)
        write_deltalake(uri, table, mode="append", storage_options=opts)
        print(json.dumps({"appended": n}))
    elif cmd == "commit-as":
        app_id, topic = rest[0], rest[1]
        ranges = [tuple(int(x) for x in a.split(":")) for a in rest[2:] if "=" not in a]
        opts = storage([a for a in rest[2:] if "=" in a])
        rows = [(p, o) for p, start, end in ranges for o in range(start, end)]
        table = pa.table({
            "pico_topic": pa.array([topic] * len(rows), pa.string()),
            "pico_partition": pa.array([p for p, _ in rows], pa.int32()),
            "pico_offset": pa.array([o for _, o in rows], pa.int64()),
            "pico_timestamp": pa.array([None] * len(rows), pa.timestamp("us", tz="UTC")),
            "pico_key": pa.array([None] * len(rows), pa.binary()),
            "n": pa.array([p * 1000 + o for p, o in rows], pa.int64()),
            "s": pa.array(["late"] * len(rows), pa.string()),
        }, schema=SCHEMA)
        txns = [Transaction(f"{app_id}-{topic}-{p}", end) for p, _, end in ranges]
        write_deltalake(uri, table, mode="append", storage_options=opts,
                        commit_properties=CommitProperties(app_transactions=txns))
        print(json.dumps({"committed": len(rows), "txn": {t.app_id: t.version for t in txns}}))
    elif cmd == "read":
        opts = storage(rest)
        dt = DeltaTable(uri, storage_options=opts)
        t = dt.to_pyarrow_table()
        rows = []
        for r in t.to_pylist():
            ts = r["pico_timestamp"]
            rows.append({
                "topic": r["pico_topic"], "partition": r["pico_partition"], "offset": r["pico_offset"],
                "timestamp_ms": None if ts is None else int(ts.timestamp() * 1000),
                "key": None if r["pico_key"] is None else base64.b64encode(r["pico_key"]).decode(),
                "n": r["n"], "s": r["s"],
                # Columns beyond the tests' schema (schema evolution), as text.
                "extra": {k: str(v) for k, v in r.items() if k not in SCHEMA.names},
            })
        # The txn versions (Delta SetTransaction actions) of the appIds asked for in APP_IDS.
        txn = {app_id: dt.transaction_version(app_id) for app_id in app_ids()}
        print(json.dumps({"version": dt.version(), "rows": rows, "txn": txn, "files": len(dt.file_uris()),
                          "file_uris": dt.file_uris(), "partition_columns": dt.metadata().partition_columns,
                          "schema": {f.name: str(f.type) for f in t.schema}}))
    else:
        sys.exit(f"unknown command {cmd}")


def app_ids():
    """appIds asked for through the APP_IDS environment variable (comma-separated)."""
    ids = os.environ.get("APP_IDS", "")
    return [i for i in ids.split(",") if i]


if __name__ == "__main__":
    main()
    # deltalake 1.6.6 can abort the interpreter at exit after a read ("terminate called without
    # an active exception", its runtime's threads); everything is written and flushed by now.
    sys.stdout.flush()
    os._exit(0)
