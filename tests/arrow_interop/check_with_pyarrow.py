"""pyarrow imports the batches picomq's Arrow exporter makes, and picomq's view reads batches
pyarrow makes. Run by ctest (arrow_interop) with tools/venv's python:

    check_with_pyarrow.py path/to/libpicomq_arrow_interop.so

The library (interop_export.cpp) builds a pmq_batch from a JSON-lines file and exports it through
the Arrow C Data Interface; pyarrow allocates the C structs (pyarrow.cffi) and imports them.
"""
import base64
import ctypes
import gc
import json
import os
import sys
import tempfile

try:
    import pyarrow as pa
    from pyarrow.cffi import ffi
except ImportError as e:  # a venv without pyarrow: fail, do not skip
    sys.exit(f"arrow_interop: cannot import pyarrow ({e}): run scripts/setup.sh")

lib = ctypes.CDLL(sys.argv[1])
lib.pmq_arrow_interop_export.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p]
lib.pmq_arrow_interop_export.restype = ctypes.c_int
lib.pmq_arrow_interop_last_error.restype = ctypes.c_char_p
lib.pmq_arrow_interop_live_exports.restype = ctypes.c_int64
lib.pmq_arrow_interop_bad_releases.restype = ctypes.c_int64
lib.pmq_arrow_interop_view_json.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
lib.pmq_arrow_interop_view_json.restype = ctypes.c_int64

WORK = tempfile.mkdtemp(prefix="arrow_interop_")
TS = pa.timestamp("ms", tz="UTC")
HEADERS = pa.map_(pa.string(), pa.binary())
checks = 0


def b64(data):
    return None if data is None else base64.b64encode(data).decode()


def record(offset, payload, key=None, headers=(), timestamp_ms=-1, payload_b64=None):
    line = {"offset": offset, "timestamp_ms": timestamp_ms, "key_b64": b64(key),
            "headers": [[name, b64(value)] for name, value in headers], "payload": payload}
    if payload_b64 is not None:
        line["payload_b64"] = b64(payload_b64)
    return line


def export(name, records, options):
    """Exports `records` through the library; returns (code, pyarrow.RecordBatch or message)."""
    path = os.path.join(WORK, name + ".jsonl")
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    c_schema = ffi.new("struct ArrowSchema*")
    c_array = ffi.new("struct ArrowArray*")
    schema_ptr = int(ffi.cast("uintptr_t", c_schema))
    array_ptr = int(ffi.cast("uintptr_t", c_array))
    code = lib.pmq_arrow_interop_export(path.encode(), json.dumps(options).encode(), schema_ptr, array_ptr)
    if code != 0:
        return code, lib.pmq_arrow_interop_last_error().decode()
    batch = pa.RecordBatch._import_from_c(array_ptr, schema_ptr)
    # Importing moves the structs: pyarrow owns them now, ours are marked released.
    assert c_schema.release == ffi.NULL and c_array.release == ffi.NULL
    return code, batch


def check(condition, message):
    global checks
    checks += 1
    if not condition:
        raise AssertionError(message)


def expect_field(batch, name, arrow_type, nullable):
    field = batch.schema.field(name)
    check(field.type == arrow_type, f"{name}: type {field.type}, expected {arrow_type}")
    check(field.nullable == nullable, f"{name}: nullable {field.nullable}, expected {nullable}")


def is_arrow_json(field):
    """The arrow.json extension on a utf8 field: pyarrow turns it into JsonType when it knows it."""
    if isinstance(field.type, pa.BaseExtensionType):
        return field.type.extension_name == "arrow.json" and field.type.storage_type == pa.string()
    metadata = field.metadata or {}
    return field.type == pa.string() and metadata.get(b"ARROW:extension:name") == b"arrow.json"


def values(batch, name):
    column = batch.column(batch.schema.get_field_index(name))
    if isinstance(column.type, pa.BaseExtensionType):
        column = column.storage
    return column.to_pylist()


def expect_values(batch, name, expected):
    got = values(batch, name)
    check(got == expected, f"{name}: {got!r}, expected {expected!r}")


def expect_json_column(batch, name, expected):
    check(is_arrow_json(batch.schema.field(name)), f"{name}: not an arrow.json column: {batch.schema.field(name)}")
    check(batch.schema.field(name).nullable, f"{name}: should be nullable")
    expect_values(batch, name, expected)


def check_metadata_and_inference():
    records = [
        record(10, '{"id":1,"price":2,"name":"pen","ok":true,"tags":["a"],"mix":"x","none":null,"big":123456789012345678901234567890}',
               key=b"k-1", headers=[("trace", b"t1"), ("dup", b"1"), ("dup", b"2"), ("gone", None), ("bin", b"\x00\xff")],
               timestamp_ms=1700000000123),
        record(11, None, key=None, timestamp_ms=-1),  # tombstone, no key, no timestamp
        record(12, '{"id":3,"price":2.5,"name":"caf\\u00e9","ok":false,"tags":{"k":[1, 2]},"mix":5,"big":7}',
               key=b"", headers=[("dup", b"")], timestamp_ms=0),
        record(13, '{"name":"only name","id":4,"id":5}'),  # absent fields; duplicate key, last wins
    ]
    code, batch = export("inferred", records, {"topic": "shop.orders", "partition": 4, "format": "json"})
    check(code == 0, f"export failed: {batch}")
    check(batch.num_rows == 4, f"{batch.num_rows} rows")
    check(batch.schema.names == ["pico_topic", "pico_partition", "pico_offset", "pico_timestamp", "pico_key",
                                 "pico_headers", "id", "price", "name", "ok", "tags", "mix", "none", "big"],
          f"names {batch.schema.names}")
    expect_field(batch, "pico_topic", pa.string(), False)
    expect_field(batch, "pico_partition", pa.int32(), False)
    expect_field(batch, "pico_offset", pa.int64(), False)
    expect_field(batch, "pico_timestamp", TS, True)
    expect_field(batch, "pico_key", pa.binary(), True)
    headers = batch.schema.field("pico_headers")
    check(headers.type == HEADERS, f"pico_headers: {headers.type}")
    check(not headers.nullable, "pico_headers is never null")
    check(not headers.type.key_field.nullable and headers.type.item_field.nullable, "map key non-null, value nullable")
    expect_values(batch, "pico_topic", ["shop.orders"] * 4)
    expect_values(batch, "pico_partition", [4] * 4)
    expect_values(batch, "pico_offset", [10, 11, 12, 13])
    ts = batch.column(batch.schema.get_field_index("pico_timestamp"))
    check(ts.is_null().to_pylist() == [False, True, False, True], f"timestamp nulls {ts}")
    check(ts.cast(pa.int64()).to_pylist() == [1700000000123, None, 0, None], f"timestamps {ts}")
    expect_values(batch, "pico_key", [b"k-1", None, b"", None])
    expect_values(batch, "pico_headers", [
        [("trace", b"t1"), ("dup", b"1"), ("dup", b"2"), ("gone", None), ("bin", b"\x00\xff")],
        [], [("dup", b"")], []])
    check(batch.column(5).null_count == 0, "records without headers have an empty map")

    expect_field(batch, "id", pa.int64(), True)
    expect_values(batch, "id", [1, None, 3, 5])
    expect_field(batch, "price", pa.float64(), True)
    expect_values(batch, "price", [2.0, None, 2.5, None])
    expect_field(batch, "name", pa.string(), True)
    expect_values(batch, "name", ["pen", None, "café", "only name"])
    expect_field(batch, "ok", pa.bool_(), True)
    expect_values(batch, "ok", [True, None, False, None])
    expect_json_column(batch, "tags", ['["a"]', None, '{"k":[1, 2]}', None])
    expect_json_column(batch, "mix", ['"x"', None, "5", None])
    expect_field(batch, "none", pa.null(), True)
    check(batch.column(batch.schema.get_field_index("none")).null_count == 4, "null column is all null")
    expect_json_column(batch, "big", ["123456789012345678901234567890", None, "7", None])
    batch.validate(full=True)


def check_non_object_payloads():
    records = [record(0, '{"a":1}'), record(1, "[1, 2]"), record(2, None), record(3, '"s"')]
    code, batch = export("whole", records, {"format": "json", "include_metadata": False})
    check(code == 0, f"export failed: {batch}")
    check(batch.schema.names == ["payload"], f"names {batch.schema.names}")
    expect_json_column(batch, "payload", ['{"a":1}', "[1, 2]", None, '"s"'])
    batch.validate(full=True)


def check_declared():
    declared = [{"name": "id", "type": "int64", "nullable": False}, {"name": "amount", "type": "float64"},
                {"name": "ok", "type": "bool"}, {"name": "label", "type": "utf8"}, {"name": "blob", "type": "binary"},
                {"name": "at", "type": "timestamp_ms"}, {"name": "doc", "type": "json"}]
    records = [
        record(0, '{"id":1,"amount":3,"ok":true,"label":"a","blob":"xy","at":1700000000000,"doc":{"n":[1]},"extra":9}'),
        record(1, '{"id":2.0,"amount":-0.5,"label":null,"doc":"s"}'),
    ]
    code, batch = export("declared", records, {"format": "json", "include_metadata": False, "declared": declared})
    check(code == 0, f"export failed: {batch}")
    check(batch.schema.names == ["id", "amount", "ok", "label", "blob", "at", "doc"], f"names {batch.schema.names}")
    expect_field(batch, "id", pa.int64(), False)
    expect_field(batch, "amount", pa.float64(), True)
    expect_field(batch, "ok", pa.bool_(), True)
    expect_field(batch, "label", pa.string(), True)
    expect_field(batch, "blob", pa.binary(), True)
    expect_field(batch, "at", TS, True)
    expect_values(batch, "id", [1, 2])
    expect_values(batch, "amount", [3.0, -0.5])
    expect_values(batch, "ok", [True, None])
    expect_values(batch, "label", ["a", None])
    expect_values(batch, "blob", [b"xy", None])
    check(batch.column(5).cast(pa.int64()).to_pylist() == [1700000000000, None], "declared timestamps")
    expect_json_column(batch, "doc", ['{"n":[1]}', '"s"'])
    batch.validate(full=True)

    # Every rejection of the batch comes back, nothing is exported.
    bad = [record(0, '{"id":"x"}'), record(1, '{"amount":1}'), record(2, "[]"), record(3, '{"id":1}')]
    code, message = export("rejected", bad, {"format": "json", "include_metadata": False, "declared": declared})
    check(code == 1, f"expected rejections, got {code}: {message}")
    check(message.splitlines() == ["0: field 'id': expected int64, found string",
                                   "1: field 'id': missing, and the column is not nullable",
                                   "2: payload is not a JSON object (found array)"], f"rejections {message!r}")


def check_text_and_raw():
    records = [record(0, "héllo"), record(1, None), record(2, "")]
    code, batch = export("text", records, {"format": "text"})
    check(code == 0, f"export failed: {batch}")
    expect_field(batch, "payload", pa.string(), True)
    check(not is_arrow_json(batch.schema.field("payload")), "text is not JSON")
    expect_values(batch, "payload", ["héllo", None, ""])
    batch.validate(full=True)

    records = [record(0, None, payload_b64=b"\x00\x01\xfe\xff"), record(1, None), record(2, None, payload_b64=b"")]
    code, batch = export("raw", records, {"format": "raw", "include_metadata": False})
    check(code == 0, f"export failed: {batch}")
    expect_field(batch, "payload", pa.binary(), True)
    expect_values(batch, "payload", [b"\x00\x01\xfe\xff", None, b""])
    batch.validate(full=True)


def check_view_reads_pyarrow_batches():
    """picomq::sdk::ArrowBatchView over a pyarrow batch sliced to a non-zero offset, with nulls."""
    full = pa.RecordBatch.from_arrays([
        pa.array([1, None, 3, 4, None, 6], pa.int64()),
        pa.array([1, 2, None, 4, 5, 6], pa.int32()),
        pa.array([0.5, 1.5, None, 3.5, 4.5, 5.5], pa.float64()),
        pa.array([True, False, None, True, False, True], pa.bool_()),
        pa.array(["a", None, "ccc", "", "eeeee", "f"], pa.string()),
        pa.array([b"\x00", b"b", None, b"", b"\xff", b"f"], pa.binary()),
        pa.array([0, 1000, None, 3000, 4000, 5000], TS),
        pa.array([[("k", b"v")], [], None, [("a", None), ("b", b"2")], [("z", b"")], []], HEADERS),
        pa.nulls(6),
    ], names=["i64", "i32", "f64", "b", "s", "bin", "ts", "m", "n"])
    sliced = full.slice(1, 4)
    c_schema = ffi.new("struct ArrowSchema*")
    c_array = ffi.new("struct ArrowArray*")
    schema_ptr = int(ffi.cast("uintptr_t", c_schema))
    array_ptr = int(ffi.cast("uintptr_t", c_array))
    sliced._export_to_c(array_ptr, schema_ptr)
    check(c_array.offset == 1 or c_array.children[0].offset == 1, "pyarrow exports the slice with an offset")
    out = ctypes.create_string_buffer(1 << 16)
    n = lib.pmq_arrow_interop_view_json(schema_ptr, array_ptr, out, len(out))
    c_schema.release(c_schema)
    c_array.release(c_array)
    check(n >= 0, f"view failed: {lib.pmq_arrow_interop_last_error().decode()}")
    seen = json.loads(out.value.decode())
    check(seen["names"] == sliced.schema.names, f"view names {seen['names']}")

    def expected(name, value):
        if value is None:
            return None
        if name == "bin":
            return b64(value)
        if name == "ts":
            return int(value.timestamp() * 1000)
        if name == "m":
            return [[k, b64(v)] for k, v in value]
        return value

    for name, got in zip(seen["names"], seen["columns"]):
        want = [expected(name, v) for v in sliced.column(sliced.schema.get_field_index(name)).to_pylist()]
        check(got == want, f"view of {name}: {got!r}, expected {want!r}")


def main():
    for round_ in (1, 2):  # twice: releasing the first round's batches must leave nothing behind
        for scenario in (check_metadata_and_inference, check_non_object_payloads, check_declared,
                         check_text_and_raw, check_view_reads_pyarrow_batches):
            scenario()
            gc.collect()  # the scenario's batches are out of scope: pyarrow releases them now
            live = lib.pmq_arrow_interop_live_exports()
            check(live == 0, f"{scenario.__name__}: {live} exported structs not released (round {round_})")
    check(lib.pmq_arrow_interop_bad_releases() == 0, "a release did not mark its struct released")
    print(f"arrow_interop: {checks} checks passed with pyarrow {pa.__version__}")


if __name__ == "__main__":
    main()
