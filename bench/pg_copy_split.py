#!/usr/bin/env python3
"""Splits a PostgreSQL binary COPY file into files of at most ROWS rows each (bench/sinks/postgres.sh).

    pg_copy_split.py IN_FILE ROWS OUT_DIR

Writes OUT_DIR/chunk-000000.bin, ... (each a complete binary COPY file: the input's header, the
rows, the trailer) and prints one path per line. Exits 1 on a malformed input.
"""
import os
import struct
import sys

SIGNATURE = b"PGCOPY\n\xff\r\n\0"


def main() -> None:
    src, rows_per_chunk, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    data = open(src, "rb").read()
    if not data.startswith(SIGNATURE):
        sys.exit(f"{src}: not a binary COPY file")
    ext_len = struct.unpack_from(">I", data, 15)[0]
    pos = 19 + ext_len
    header = data[:pos]
    trailer = struct.pack(">h", -1)
    unpack_h, unpack_i = struct.Struct(">h").unpack_from, struct.Struct(">i").unpack_from
    os.makedirs(out_dir, exist_ok=True)
    chunk, start, count, total = 0, pos, 0, 0

    def flush(end):
        nonlocal chunk, start, count
        path = os.path.join(out_dir, f"chunk-{chunk:06d}.bin")
        with open(path, "wb") as f:
            f.write(header)
            f.write(data[start:end])
            f.write(trailer)
        print(path)
        chunk, start, count = chunk + 1, end, 0

    while True:
        (fields,) = unpack_h(data, pos)
        if fields == -1:
            break
        pos += 2
        for _ in range(fields):
            (length,) = unpack_i(data, pos)
            pos += 4 + (length if length > 0 else 0)
        count += 1
        total += 1
        if count == rows_per_chunk:
            flush(pos)
    if count:
        flush(pos)
    if pos + 2 != len(data):
        sys.exit(f"{src}: {len(data) - pos - 2} bytes after the trailer")
    print(f"{total} rows in {chunk} chunks", file=sys.stderr)


if __name__ == "__main__":
    main()
