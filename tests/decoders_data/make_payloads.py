#!/usr/bin/env python3
"""Encodes the decoder test payloads with encoders independent of ours.

    make_payloads.py OUTDIR                  proto (python-protobuf), flatbuffer (flatc), avro (fastavro)
    make_payloads.py --registry URL OUTDIR   also registers the Avro schemas in a schema registry
                                             and frames records with confluent-kafka's AvroSerializer

Writes OUTDIR/<format>/<case>.bin (one payload each), OUTDIR/all_types.pb (protoc's descriptor
set) and, with --registry, OUTDIR/registry/<case>.bin + OUTDIR/registry/ids.json. The expected
JSON is written in the C++ tests, field by field: this script only says what was encoded.
Runs in tools/venv (scripts/setup.sh installs fastavro, protobuf, confluent-kafka).
"""
import datetime
import decimal
import json
import os
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))


def write(out, fmt, case, data):
    os.makedirs(os.path.join(out, fmt), exist_ok=True)
    with open(os.path.join(out, fmt, case + ".bin"), "wb") as f:
        f.write(data)


# ------------------------------------------------------------------ proto (python-protobuf)

def proto_cases(out):
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
    from google.protobuf import any_pb2, timestamp_pb2

    desc = os.path.join(out, "all_types.pb")
    subprocess.run(["protoc", "-I", HERE, "--include_imports", "--descriptor_set_out=" + desc,
                    "all_types.proto", "legacy.proto"], check=True, cwd=HERE)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(desc, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    Order = message_factory.GetMessageClass(pool.FindMessageTypeByName("picomq.test.Order"))
    Line = message_factory.GetMessageClass(pool.FindMessageTypeByName("picomq.test.Line"))
    Legacy = message_factory.GetMessageClass(pool.FindMessageTypeByName("picomq.legacy.Legacy"))

    def order(d):
        return json_format.ParseDict(d, Order(), descriptor_pool=pool)

    full = order({
        "order_id": "o-1",
        "scalars": {
            "f_double": 1.5, "f_float": 0.1, "f_int32": -2147483648, "f_int64": "-9223372036854775808",
            "f_uint32": 4294967295, "f_uint64": "18446744073709551615", "f_sint32": -5,
            "f_sint64": "9223372036854775807", "f_fixed32": 4294967295, "f_fixed64": "18446744073709551615",
            "f_sfixed32": -1, "f_sfixed64": "-9223372036854775808", "f_bool": True,
            "f_string": "h\u00e9llo \"w\u00f6rld\"\n\U0001F600", "f_bytes": "AP/+", "f_color": "MINUS_ONE",
            "f_optional": 0,
        },
        "quantities": [1, -1, "9223372036854775807"],
        "tags": ["a", ""],
        "colors": ["RED", "MINUS_ONE"],
        "lines": [{"sku": "s1", "quantity": 2, "prices": [1.25, -0.0]}, {}],
        "counters": {"x": -7, "y": "9007199254740993"},
        "lines_by_number": {"-3": {"sku": "neg"}},
        "flags": {"true": "yes"},
        "voucher": {"sku": "v"},
        "created_at": "2024-01-31T12:34:56.789Z",
        "ttl": "-1.500s",
        "maybe_count": "-42",
        "maybe_note": "",
        "maybe_flag": False,
        "maybe_ratio": "NaN",
        "maybe_blob": "AQI=",
        "attributes": {"a": 1, "b": [True, None, "x"], "c": {"d": -1.5}},
        "any_value": "str",
        "list": [1, "two", None],
        "detail": {"@type": "type.googleapis.com/picomq.test.Line", "sku": "in-any", "quantity": 3},
        "nothing": {},
        "mask": "a.b,camelCase",
        "ship_to": {"street": "Main", "city": "Z\u00fcrich"},
        "parent": {"order_id": "p"},
        "camelCaseField": "5",
    })
    write(out, "proto", "order_full", full.SerializeToString())
    write(out, "proto", "order_empty", Order().SerializeToString())

    special = order({"scalars": {"f_double": "Infinity", "f_float": "-Infinity", "f_color": 42},
                     "points": "5", "created_at": "1969-12-31T23:59:59.000001Z",
                     "ttl": "315576000000s", "any_value": {"k": [1.5, False]}})
    write(out, "proto", "order_special", special.SerializeToString())

    unknown_any = Order()
    unknown_any.detail.type_url = "type.googleapis.com/unknown.Type"
    unknown_any.detail.value = b"\x08\x01"
    unknown_any.card = "4111"
    write(out, "proto", "order_any_unknown", unknown_any.SerializeToString())

    wkt_any = Order()
    ts = timestamp_pb2.Timestamp(seconds=0, nanos=5000)
    wkt_any.detail.Pack(ts)
    write(out, "proto", "order_any_wkt", wkt_any.SerializeToString())

    # The wire allows a message to come in several pieces: parsers merge them (scalars: last
    # wins, repeated: appended, messages: merged, map keys: last wins, oneof: last member wins).
    first = order({"order_id": "first", "quantities": [1], "scalars": {"f_int32": 1, "f_string": "a"},
                   "counters": {"k": 1, "only_first": 2}, "card": "c1"})
    second = order({"order_id": "second", "quantities": [2], "scalars": {"f_int64": "2"},
                    "counters": {"k": 3}, "points": "9"})
    write(out, "proto", "order_merged", first.SerializeToString() + second.SerializeToString())

    legacy = json_format.ParseDict({"id": 1, "name": "n", "level": "HIGH", "levels": ["LOW", "HIGH"],
                                    "extra": {"a": 5, "b": "g"}}, Legacy(), descriptor_pool=pool)
    write(out, "proto", "legacy_full", legacy.SerializeToString())
    partial = Legacy()
    partial.name = "no id"
    write(out, "proto", "legacy_missing_required", partial.SerializePartialToString())


# ------------------------------------------------------------------ flatbuffers (flatc)

FLATBUFFER_CASES = {
    "item_full": {
        "id": 18446744073709551615, "name": "sword \u00e9", "color": "Minus", "pos": {"x": 1.5, "y": -2, "z": 0},
        "bounds": {"min": {"x": 0, "y": 0, "z": 0}, "max": {"x": 1, "y": 2, "z": 3}, "tags": [1, 2, 255]},
        "count": 0, "ratio": 0.25, "big": -9223372036854775808, "huge": 9007199254740993, "maybe": 0,
        "active": False, "tiny": -128, "equipped_type": "Weapon", "equipped": {"name": "axe", "damage": -3},
        "parts": [{"name": "hilt"}, {"name": "blade", "count": 2}],
        "points": [{"x": 1, "y": 2, "z": 3}, {"x": -1, "y": -2, "z": -3}],
        "labels": ["a", "", "\u00fc"], "colors": ["Red", "Blue"],
        "loot_type": ["Armor", "Weapon"], "loot": [{"defense": 5}, {"name": "dagger"}],
        "data": [0, 1, 255], "temp": -0.5,
    },
    "item_defaults": {"name": "plain"},
    "item_armor": {"name": "shield", "equipped_type": "Armor", "equipped": {"defense": 12}},
}


def flatbuffer_cases(out):
    work = os.path.join(out, "flatbuffer-json")
    os.makedirs(work, exist_ok=True)
    os.makedirs(os.path.join(out, "flatbuffer"), exist_ok=True)
    for case, value in FLATBUFFER_CASES.items():
        with open(os.path.join(work, case + ".json"), "w") as f:
            json.dump(value, f)
        subprocess.run(["flatc", "-b", "-o", os.path.join(out, "flatbuffer"), os.path.join(HERE, "inventory.fbs"),
                        os.path.join(work, case + ".json")], check=True)
    subprocess.run(["flatc", "-b", "--schema", "-o", out, os.path.join(HERE, "inventory.fbs")], check=True)


# ------------------------------------------------------------------ avro (fastavro)

# The writer schema of the Avro cases (also the fuzz target's schema).
with open(os.path.join(HERE, "order.avsc")) as _f:
    AVRO_SCHEMA = json.load(_f)

UTC = datetime.timezone.utc


def avro_records():
    full = {
        "id": -9223372036854775808, "small": -2147483648, "name": "na\u00efve \"q\"",
        "price": decimal.Decimal("-12345678901234567890.1234"), "fixed_price": decimal.Decimal("0.05"),
        "ratio": 0.1, "score": float("inf"), "ok": True, "note": "hello", "multi": ("long", 9223372036854775807),
        "blob": b"\x00\xff", "digest": b"abcd", "status": "SHIPPED",
        "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": -2}], "attrs": {"x": 1, "y": -1},
        "address": {"city": "Bern", "next": {"city": "Basel", "next": None}},
        "day": datetime.date(2024, 1, 31),
        "at_ms": datetime.datetime(2024, 1, 31, 12, 34, 56, 789000, tzinfo=UTC),
        "at_us": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "local_ms": datetime.datetime(2000, 2, 29, 0, 0, 0, 1000),
        "t_ms": datetime.time(12, 34, 56, 789000), "t_us": datetime.time(23, 59, 59, 999999),
        "uid": uuid.UUID("123e4567-e89b-12d3-a456-426614174000"),
        "line_ref": {"sku": "ref", "qty": 0},
    }
    nulls = dict(full, note=None, multi=None, address=None, lines=[], attrs={}, score=float("nan"),
                 price=decimal.Decimal("0"), fixed_price=decimal.Decimal("-0.01"), name="")
    multi_string = dict(full, multi=("string", "s"))
    multi_array = dict(full, multi=("array", [1, -1]))
    return {"order_full": full, "order_nulls": nulls, "order_multi_string": multi_string,
            "order_multi_array": multi_array}


def avro_cases(out):
    import io
    import fastavro

    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    for case, record in avro_records().items():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        write(out, "avro", case, buf.getvalue())
    with open(os.path.join(out, "order.avsc"), "w") as f:
        json.dump(AVRO_SCHEMA, f)


REGISTRY_SCHEMA_V2 = {
    "type": "record", "name": "Ping", "namespace": "shop",
    "fields": [{"name": "n", "type": "long"}, {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
               {"name": "tag", "type": ["null", "string"], "default": None}],
}


def registry_cases(url, out):
    """Registers two schemas through confluent-kafka's client and frames records with its
    AvroSerializer (magic byte 0 + the id the registry assigned + Avro binary)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": url})
    ids = {}
    os.makedirs(os.path.join(out, "registry"), exist_ok=True)
    for subject, schema, records in (
            ("orders-value", AVRO_SCHEMA, {"order": avro_records()["order_full"]}),
            ("pings-value", REGISTRY_SCHEMA_V2, {"ping1": {"n": 1, "at": datetime.datetime(2024, 5, 1, tzinfo=UTC),
                                                           "tag": "x"},
                                                 "ping2": {"n": 2, "at": datetime.datetime(2024, 5, 2, tzinfo=UTC),
                                                           "tag": None}})):
        serializer = AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": True})
        topic = subject[: -len("-value")]
        for case, record in records.items():
            data = serializer(record, SerializationContext(topic, MessageField.VALUE))
            write(out, "registry", case, data)
            ids[case] = int.from_bytes(data[1:5], "big")
    with open(os.path.join(out, "registry", "ids.json"), "w") as f:
        json.dump(ids, f)


def main(argv):
    registry = None
    if len(argv) >= 3 and argv[1] == "--registry":
        registry = argv[2]
        argv = [argv[0]] + argv[3:]
    if len(argv) != 2:
        sys.exit(__doc__)
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    if registry:
        registry_cases(registry, out)
        return
    proto_cases(out)
    flatbuffer_cases(out)
    avro_cases(out)


if __name__ == "__main__":
    main(sys.argv)
