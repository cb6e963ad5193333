#!/usr/bin/env python3
"""SurrealDB: the same rows through POST /sql (spliced into the text), POST /rpc JSON (bound) and
POST /rpc CBOR (bound), sequentially, into fresh tables of a running server; rows/s of each.
What docs/sinks/surrealdb.md cites for choosing /rpc + CBOR.
  surrealdb_endpoints.py URL [REQUESTS] [ROWS]      (root / root, namespace and database main)
"""
import base64, json, os, sys, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surrealdb_endpoints_cbor import cbor  # noqa: E402

url = sys.argv[1]
requests = int(sys.argv[2]) if len(sys.argv) > 2 else 20
per = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
auth = "Basic " + base64.b64encode(b"root:root").decode()


def post(path, body, ctype, accept):
    r = urllib.request.Request(url + path, data=body, method="POST", headers={
        "Authorization": auth, "surreal-ns": "main", "surreal-db": "main", "Content-Type": ctype, "Accept": accept})
    with urllib.request.urlopen(r) as resp:
        out = resp.read()
    if b"ERR" in out: raise SystemExit(f"{path}: an ERR answer: {out[:300]!r}")


def rows(table, k):
    return [{"id": ["bench." + table, 0, k * per + i], "pico_topic": "bench." + table, "pico_partition": 0,
             "pico_offset": k * per + i, "pico_timestamp": 1700000000000, "n": k * per + i,
             "name": f"order-{k * per + i}", "amount": 12.5, "tags": ["a", "b"]} for i in range(per)]


def run(name, send):
    table = f"ep_{name}_{int(time.time())}"
    post("/sql", f"DEFINE TABLE {table} SCHEMALESS;".encode(), "text/plain", "application/json")
    start = time.perf_counter()
    for k in range(requests): send(table, rows(table, k))
    took = time.perf_counter() - start
    print(f"{name:10s} {requests * per / took:8.0f} rows/s  ({requests} requests of {per} rows, {took:.2f} s)")


text = "INSERT IGNORE INTO $tb $v RETURN NONE"
run("sql_text", lambda t, r: post("/sql", f"INSERT IGNORE INTO {t} {json.dumps(r)} RETURN NONE;".encode(),
                                   "text/plain", "application/json"))
run("rpc_json", lambda t, r: post("/rpc", json.dumps({"id": 1, "method": "query", "params": [text, {"tb": t, "v": r}]}).encode(),
                                   "application/json", "application/json"))
run("rpc_cbor", lambda t, r: post("/rpc", cbor({"id": 1, "method": "query", "params": [text, {"tb": t, "v": r}]}),
                                   "application/cbor", "application/cbor"))
