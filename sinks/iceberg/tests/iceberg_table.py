"""The Iceberg sink's tests' independent side: pyiceberg (PyPI) creates the tables and reads them
back through the same REST catalog, DuckDB's iceberg extension (PyPI) reads them again from the
table's metadata file, and pyiceberg plays the concurrent writer.

  iceberg_table.py CATALOG_JSON create TABLE SCHEMA_JSON [PARTITION_JSON]
  iceberg_table.py CATALOG_JSON rows TABLE            -> one JSON object per row (pyiceberg)
  iceberg_table.py CATALOG_JSON duckdb-rows TABLE     -> the same rows read by DuckDB
  iceberg_table.py CATALOG_JSON snapshots TABLE       -> one JSON object per snapshot of the ancestry
  iceberg_table.py CATALOG_JSON files TABLE           -> one JSON object per live data file
  iceberg_table.py CATALOG_JSON data-files TABLE      -> one JSON object per file stored under the
                                                         table's data location, referenced or not
  iceberg_table.py CATALOG_JSON put-file TABLE NAME   writes a small file NAME into the data location
  iceberg_table.py CATALOG_JSON append TABLE ROWS_JSON
  iceberg_table.py CATALOG_JSON drop TABLE
  iceberg_table.py CATALOG_JSON table-bucket NAME    a SeaweedFS table bucket (S3 Tables API, boto3)

CATALOG_JSON: pyiceberg catalog properties, e.g. {"uri": …, "s3.endpoint": …}.
SCHEMA_JSON: [[name, type, required], …] with type one of long, int, string, double, float,
boolean, timestamptz, timestamp, date, binary, map<string,binary> (pico_headers). PARTITION_JSON: [[source column, transform], …] with
transform identity, year, month, day, hour, bucket[N], truncate[W].
Rows are printed with timestamps as microseconds since the epoch, binary as base64, sorted.
"""
import base64
import json
import sys

from pyiceberg.catalog import load_catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (BucketTransform, DayTransform, HourTransform, IdentityTransform,
                                  MonthTransform, TruncateTransform, YearTransform)
from pyiceberg.types import (BinaryType, BooleanType, DateType, DoubleType, FloatType, IntegerType, LongType, MapType,
                             NestedField, StringType, TimestampType, TimestamptzType)

TYPES = {"long": LongType, "int": IntegerType, "string": StringType, "double": DoubleType, "float": FloatType,
         "boolean": BooleanType, "timestamptz": TimestamptzType, "timestamp": TimestampType, "date": DateType, "binary": BinaryType,
         # Key and value ids past any top-level field's (create_table assigns fresh ids anyway).
         "map<string,binary>": lambda: MapType(9001, StringType(), 9002, BinaryType(), value_required=False)}


def transform(name):
    simple = {"identity": IdentityTransform, "year": YearTransform, "month": MonthTransform, "day": DayTransform,
              "hour": HourTransform}
    if name in simple:
        return simple[name]()
    if name.startswith("bucket[") and name.endswith("]"):
        return BucketTransform(int(name[7:-1]))
    if name.startswith("truncate[") and name.endswith("]"):
        return TruncateTransform(int(name[9:-1]))
    raise SystemExit(f"unknown transform {name}")


def plain(value):
    import datetime
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        # Exactly, in integers (a float product can land a microsecond low).
        return (value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(microseconds=1)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):  # a map
        return {k: plain(v) for k, v in value}
    return value


def print_rows(rows):
    rows = [{k: plain(v) for k, v in r.items()} for r in rows]
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    for r in rows:
        print(json.dumps(r, sort_keys=True))


def main():
    props, command, name = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    if command == "table-bucket":
        import boto3
        client = boto3.client("s3tables", endpoint_url=props["s3.endpoint"], aws_access_key_id=props["s3.access-key-id"],
                              aws_secret_access_key=props["s3.secret-access-key"], region_name=props.get("s3.region", "us-east-1"))
        print(client.create_table_bucket(name=name)["arn"])
        return
    catalog = load_catalog("picomq-test", **{"type": "rest", **props})
    namespace = tuple(name.split(".")[:-1])
    if command == "create":
        fields = [NestedField(i + 1, n, TYPES[t](), required=bool(req))
                  for i, (n, t, req) in enumerate(json.loads(sys.argv[4]))]
        schema = Schema(*fields)
        spec = PartitionSpec()
        if len(sys.argv) > 5:
            by_name = {f.name: f.field_id for f in fields}
            spec = PartitionSpec(*[PartitionField(source_id=by_name[col], field_id=1000 + i, transform=transform(t),
                                                  name=f"{col}_{t.split('[')[0]}")
                                   for i, (col, t) in enumerate(json.loads(sys.argv[5]))])
        try:
            catalog.create_namespace(namespace)
        except Exception as e:  # already there
            if "exist" not in str(e).lower():
                raise
        table = catalog.create_table(name, schema=schema, partition_spec=spec)
        print(table.metadata_location)
    elif command == "rows":
        print_rows(catalog.load_table(name).scan().to_arrow().to_pylist())
    elif command == "duckdb-rows":
        print_rows(duckdb_rows(catalog.load_table(name), props))
    elif command == "snapshots":
        table = catalog.load_table(name)
        snapshot = table.current_snapshot()
        chain = []
        while snapshot is not None:
            summary = snapshot.summary
            chain.append({"id": snapshot.snapshot_id, "parent": snapshot.parent_snapshot_id,
                          "operation": str(summary.operation.value) if summary else None,
                          "summary": dict(summary.additional_properties) if summary else {}})
            snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
        for s in chain:
            print(json.dumps(s, sort_keys=True))
    elif command == "files":
        table = catalog.load_table(name)
        for task in table.scan().plan_files():
            f = task.file
            print(json.dumps({"path": f.file_path, "records": f.record_count, "partition": [plain(v) for v in f.partition],
                              "format": str(f.file_format.value)}, sort_keys=True))
    elif command in ("data-files", "put-file"):
        from pyarrow.fs import FileSelector, FileType
        table = catalog.load_table(name)
        location = table.properties.get("write.data.path") or table.location().rstrip("/") + "/data"
        scheme, netloc, path = table.io.parse_location(location)
        fs = table.io.fs_by_scheme(scheme, netloc)
        prefix = location[:len(location) - len(path)] if location.endswith(path) else scheme + "://"
        if command == "put-file":
            with fs.open_output_stream(path + "/" + sys.argv[4]) as out:
                out.write(b"not a data file of the table")
            return
        for info in fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True)):
            if info.type == FileType.File:
                print(json.dumps({"path": prefix + info.path, "name": info.base_name}, sort_keys=True))
    elif command == "append":
        import pyarrow as pa
        table = catalog.load_table(name)
        rows = json.loads(sys.argv[4])
        arrow_schema = table.schema().as_arrow()
        table.append(pa.Table.from_pylist(rows, schema=arrow_schema))
        print(table.current_snapshot().snapshot_id)
    elif command == "drop":
        catalog.drop_table(name)
    else:
        raise SystemExit(f"unknown command {command}")


def duckdb_rows(table, props):
    """The table read by DuckDB's iceberg extension, from the metadata file the catalog points at."""
    import importlib
    import pathlib

    import duckdb
    con = duckdb.connect()
    for ext in ("parquet", "avro", "httpfs", "iceberg"):
        module = importlib.import_module(f"duckdb_extension_{ext}")
        path = next(pathlib.Path(module.__file__).parent.glob("extensions/*/*.duckdb_extension"))
        con.execute(f"LOAD '{path}'")
    endpoint = props.get("s3.endpoint")
    if endpoint:
        host = endpoint.split("://", 1)[1]
        con.execute("CREATE SECRET s3 (TYPE s3, KEY_ID ?, SECRET ?, ENDPOINT ?, URL_STYLE 'path', USE_SSL ?, REGION ?)",
                    [props.get("s3.access-key-id", ""), props.get("s3.secret-access-key", ""), host,
                     endpoint.startswith("https"), props.get("s3.region", "us-east-1")])
    # Through Arrow: DuckDB's own conversion of timestamptz to Python needs pytz.
    return con.execute("SELECT * FROM iceberg_scan(?)", [table.metadata_location]).fetch_arrow_table().to_pylist()


if __name__ == "__main__":
    main()
