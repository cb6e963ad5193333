#!/usr/bin/env python3
"""The Delta Lake peer of bench/peers.sh: what a user writes without picomq-connect. confluent-kafka
consumes the topic, json.loads decodes each record, pyarrow builds a table of the sink's columns
(pico_topic, pico_partition, pico_offset, pico_timestamp and the payload's fields; nested values
as compact JSON text, as the sink conforms them to the table), deltalake's write_deltalake appends
it, and the offsets are committed to the group after each write: at least once, like the sink.
Same commit cadence (ROLL_RECORDS per commit) and file size as the sink, the same codec.

  python_delta.py BOOTSTRAP TOPIC N TABLE ROLL_RECORDS FILE_BYTES COMPRESSION GROUP

Prints one JSON line: {"system", "records", "startup_s" (start -> first record consumed),
"commits"}. The caller times the process (wall, CPU, peak RSS) as it times picomq-connect.
"""
import json
import os
import sys
import time

started = time.monotonic()

import pyarrow as pa  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from deltalake import WriterProperties, write_deltalake  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sinks"))
from delta_tool import SCHEMA  # noqa: E402  (the table's schema, as the adapter creates it)

PAYLOAD_FIELDS = [f.name for f in SCHEMA if not f.name.startswith("pico_")]
NESTED = {"items", "ship_to"}


def main():
    bootstrap, topic, n, table, roll, file_bytes, compression, group = sys.argv[1:9]
    n, roll, file_bytes = int(n), int(roll), int(file_bytes)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    props = WriterProperties(compression=compression.upper())
    columns = {name: [] for name in SCHEMA.names}
    pending, written, commits, first = 0, 0, 0, None
    last = {}
    while written < n:
        for m in consumer.consume(num_messages=10000, timeout=1.0):
            if m.error():
                raise SystemExit(f"python_delta: {m.error()}")
            if first is None:
                first = time.monotonic()
            doc = json.loads(m.value())
            columns["pico_topic"].append(m.topic())
            columns["pico_partition"].append(m.partition())
            columns["pico_offset"].append(m.offset())
            columns["pico_timestamp"].append(m.timestamp()[1] * 1000)
            for name in PAYLOAD_FIELDS:
                v = doc.get(name)
                columns[name].append(json.dumps(v, separators=(",", ":")) if name in NESTED and v is not None else v)
            last[(m.topic(), m.partition())] = m.offset()
            pending += 1
        if pending and (pending >= roll or written + pending >= n):
            batch = pa.Table.from_pydict(
                {k: (pa.array(v, pa.timestamp("us", tz="UTC")) if k == "pico_timestamp" else v) for k, v in columns.items()},
                schema=SCHEMA)
            write_deltalake(table, batch, mode="append", target_file_size=file_bytes, writer_properties=props)
            consumer.commit(offsets=[TopicPartition(t, p, o + 1) for (t, p), o in last.items()], asynchronous=False)
            written += pending
            commits += 1
            pending = 0
            columns = {name: [] for name in SCHEMA.names}
    consumer.close()
    print(json.dumps({"system": "python-confluent-kafka-deltalake", "records": written,
                      "startup_s": round((first or time.monotonic()) - started, 3), "commits": commits}))
    sys.stdout.flush()
    os._exit(0)  # deltalake's runtime threads can abort the interpreter at exit (delta_tool.py)


if __name__ == "__main__":
    main()
