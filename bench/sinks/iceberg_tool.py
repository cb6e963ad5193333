"""bench/sinks/iceberg.sh's helper, on pyiceberg (PyPI) and pyarrow, independent of the sink:

  iceberg_tool.py CATALOG_JSON bucket NAME             a SeaweedFS table bucket (S3 Tables API)
  iceberg_tool.py CATALOG_JSON create TABLE [plain]    an empty table for the orders shape (gen_records.py), with the
                                                       sink's pico_* columns, or `plain`: the record's fields alone
                                                       (what Iceberg's Kafka Connect sink writes)
  iceberg_tool.py CATALOG_JSON verify TABLE N [exact|ids]
                                                       rows=N files=F bytes=B; `exact`: offsets 0..N-1 once each;
                                                       `ids`: N distinct order ids (a table without pico_offset)
  iceberg_tool.py CATALOG_JSON count TABLE             a line in, the table's total-records out (its current
                                                       snapshot's summary), until stdin ends
  iceberg_tool.py CATALOG_JSON dump TABLE OUT.arrow    the table's rows as an Arrow IPC file (the baseline's input)
  iceberg_tool.py CATALOG_JSON write TABLE IN.arrow FILE_BYTES COMPRESSION
                                                       pyiceberg table.append() of the IPC file's rows (one
                                                       commit), write.target-file-size-bytes = FILE_BYTES
"""
import json
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import (BooleanType, DoubleType, IntegerType, LongType, NestedField, StringType,
                             TimestamptzType)

COLUMNS = [("pico_topic", StringType, True), ("pico_partition", IntegerType, True), ("pico_offset", LongType, True),
           ("pico_timestamp", TimestamptzType, False), ("id", StringType, False), ("customer", LongType, False),
           ("status", StringType, False), ("channel", StringType, False), ("amount", DoubleType, False),
           ("ccy", StringType, False), ("items", StringType, False), ("qty", LongType, False),
           ("ship_to", StringType, False), ("express", BooleanType, False), ("ts", LongType, False)]


def main():
    props, cmd, name = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    if cmd == "bucket":
        import boto3
        boto3.client("s3tables", endpoint_url=props["s3.endpoint"], aws_access_key_id=props["s3.access-key-id"],
                     aws_secret_access_key=props["s3.secret-access-key"],
                     region_name="us-east-1").create_table_bucket(name=name)
        return
    catalog = load_catalog("bench", **{"type": "rest", **props})
    if cmd == "create":
        namespace = tuple(name.split(".")[:-1])
        try:
            catalog.create_namespace(namespace)
        except Exception as e:
            if "exist" not in str(e).lower():
                raise
        columns = [c for c in COLUMNS if not c[0].startswith("pico_")] if sys.argv[4:] == ["plain"] else COLUMNS
        catalog.create_table(name, schema=Schema(*[NestedField(i + 1, n, t(), required=r)
                                                   for i, (n, t, r) in enumerate(columns)]))
    elif cmd == "verify":
        n, mode = int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else ""
        table = catalog.load_table(name)
        t = table.scan(selected_fields=("id" if mode == "ids" else "pico_offset",)).to_arrow()
        tasks = list(table.scan().plan_files())
        if t.num_rows != n:
            sys.exit(f"{name}: {t.num_rows} rows, expected {n}")
        if mode == "ids" and pc.count_distinct(t.column("id")).as_py() != n:
            sys.exit(f"{name}: {pc.count_distinct(t.column('id')).as_py()} distinct ids, expected {n}")
        if mode == "exact":
            offsets = t.column("pico_offset")
            distinct = pc.count_distinct(offsets).as_py()
            lo, hi = pc.min(offsets).as_py(), pc.max(offsets).as_py()
            if (distinct, lo, hi) != (n, 0, n - 1):
                sys.exit(f"{name}: offsets {distinct} distinct in {lo}..{hi}, expected 0..{n - 1} once each")
        print(f"rows={t.num_rows} files={len(tasks)} bytes={sum(x.file.file_size_in_bytes for x in tasks)}")
    elif cmd == "count":
        print("ready", flush=True)
        for _ in sys.stdin:
            snapshot = catalog.load_table(name).current_snapshot()
            print(int(snapshot.summary["total-records"]) if snapshot and snapshot.summary else 0, flush=True)
    elif cmd == "dump":
        t = catalog.load_table(name).scan().to_arrow().sort_by("pico_offset")
        with ipc.new_file(sys.argv[4], t.schema) as w:
            w.write_table(t)
    elif cmd == "write":
        src, file_bytes, compression = sys.argv[4], sys.argv[5], sys.argv[6]
        table = catalog.load_table(name)
        with table.transaction() as tx:
            tx.set_properties({"write.target-file-size-bytes": file_bytes,
                               "write.parquet.compression-codec": compression})
        with pa.memory_map(src) as f:
            t = ipc.open_file(f).read_all()
        catalog.load_table(name).append(t)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
