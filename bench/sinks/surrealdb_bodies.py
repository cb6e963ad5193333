#!/usr/bin/env python3
"""The SurrealDB sink's request bodies, rebuilt from the table it wrote (bench/sinks/surrealdb.sh):
the records read back through POST /sql in offset order, each with its id [topic, partition,
offset], encoded as the sink encodes them (POST /rpc, CBOR, INSERT IGNORE INTO $tb $v RETURN NONE)
PER records a body; a curl config sending them all.
  surrealdb_bodies.py URL TABLE PER OUT_DIR     (namespace / database bench, root / root)
"""
import base64, json, os, sys, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surrealdb_endpoints_cbor import cbor  # noqa: E402

url, table, per, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
auth = "Basic " + base64.b64encode(b"root:root").decode()


def sql(text):
    r = urllib.request.Request(url + "/sql", data=text.encode(), method="POST", headers={
        "Authorization": auth, "surreal-ns": "bench", "surreal-db": "bench", "Accept": "application/json"})
    return json.load(urllib.request.urlopen(r))[-1]["result"]


rows = []
page = 50000
while True:
    got = sql(f"SELECT * OMIT id FROM {table} ORDER BY pico_partition, pico_offset LIMIT {page} START {len(rows)};")
    rows += got
    if len(got) < page: break
text = "INSERT IGNORE INTO $tb $v RETURN NONE"
with open(f"{out}/curl.cfg", "w") as cfg:
    for n, start in enumerate(range(0, len(rows), per)):
        items = []
        for r in rows[start:start + per]:
            r["id"] = [r["pico_topic"], r["pico_partition"], r["pico_offset"]]
            items.append(r)
        with open(f"{out}/body.{n:06d}", "wb") as f:
            f.write(cbor({"id": n + 1, "method": "query", "params": [text, {"tb": table, "v": items}]}))
        cfg.write(("next\n" if n else "") + f'url = "{url}/rpc"\ndata-binary = "@{out}/body.{n:06d}"\n'
                  'user = "root:root"\nheader = "Content-Type: application/cbor"\nheader = "Accept: application/cbor"\n'
                  'header = "surreal-ns: bench"\nheader = "surreal-db: bench"\n'
                  f'output = "{out}/answer.{n:06d}"\n')
