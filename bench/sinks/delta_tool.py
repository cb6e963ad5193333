"""bench/sinks/delta.sh's helper, on the deltalake package (PyPI) and pyarrow, independent of the
sink:

  delta_tool.py create TABLE            an empty table for the orders shape (gen_records.py)
  delta_tool.py verify TABLE N [exact]  rows=N files=F bytes=B; with `exact`: offsets 0..N-1 once each
  delta_tool.py dump TABLE OUT.arrow    the table's rows as an Arrow IPC file (the baseline's input)
  delta_tool.py write TABLE IN.arrow FILE_BYTES COMPRESSION
                                        write_deltalake(mode="append") of the IPC file's rows (one
                                        commit), target_file_size FILE_BYTES (the sink's file size)
"""
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from deltalake import DeltaTable, WriterProperties, write_deltalake

SCHEMA = pa.schema([
    pa.field("pico_topic", pa.string(), nullable=False),
    pa.field("pico_partition", pa.int32(), nullable=False),
    pa.field("pico_offset", pa.int64(), nullable=False),
    pa.field("pico_timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("id", pa.string()), pa.field("customer", pa.int64()), pa.field("status", pa.string()),
    pa.field("channel", pa.string()), pa.field("amount", pa.float64()), pa.field("ccy", pa.string()),
    pa.field("items", pa.string()), pa.field("qty", pa.int64()), pa.field("ship_to", pa.string()),
    pa.field("express", pa.bool_()), pa.field("ts", pa.int64()),
])


def files_and_bytes(dt):
    uris = dt.file_uris()
    return len(uris), sum(os.path.getsize(u.removeprefix("file://")) for u in uris)


def main():
    cmd, table = sys.argv[1], sys.argv[2]
    if cmd == "create":
        DeltaTable.create(table, schema=SCHEMA)
    elif cmd == "verify":
        n, exact = int(sys.argv[3]), len(sys.argv) > 4
        dt = DeltaTable(table)
        t = dt.to_pyarrow_table(columns=["pico_offset"])
        files, size = files_and_bytes(dt)
        if t.num_rows != n:
            sys.exit(f"{table}: {t.num_rows} rows, expected {n}")
        if exact:
            offsets = t.column("pico_offset")
            distinct = pc.count_distinct(offsets).as_py()
            lo, hi = pc.min(offsets).as_py(), pc.max(offsets).as_py()
            if (distinct, lo, hi) != (n, 0, n - 1):
                sys.exit(f"{table}: offsets {distinct} distinct in {lo}..{hi}, expected 0..{n - 1} once each")
        print(f"rows={t.num_rows} files={files} bytes={size}")
    elif cmd == "dump":
        t = DeltaTable(table).to_pyarrow_table().sort_by("pico_offset")
        with ipc.new_file(sys.argv[3], t.schema) as w:
            w.write_table(t)
    elif cmd == "write":
        src, file_bytes, compression = sys.argv[3], int(sys.argv[4]), sys.argv[5].upper()
        with pa.memory_map(src) as f:
            t = ipc.open_file(f).read_all()
        write_deltalake(table, t, mode="append", target_file_size=file_bytes,
                        writer_properties=WriterProperties(compression=compression))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
    # deltalake 1.6.6 can abort the interpreter at exit after a read ("terminate called without
    # an active exception", its runtime's threads); everything is written and flushed by now.
    sys.stdout.flush()
    os._exit(0)
