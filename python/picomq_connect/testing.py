"""Unit-test a Python sink without Kafka or the runtime.

    from picomq_connect.testing import SinkTester

    with SinkTester(MySink(table="t")) as t:          # open() on enter, close() on exit
        outcome = t.write([{"id": 1}, {"id": 2}])      # one batch, on the sink's best plane
        assert outcome.status == "ok"
        outcome = t.write([{"id": 3}], first_offset=2)
        assert outcome.rejected == [(0, "duplicate id")]

The batch goes through the plane the runtime would choose (sink_data_plane_spec(sink).best_plane,
the ABI's normalisation) and through the same outcome mapping as the host plugin
(picomq_connect._dispatch): an exception is "retry", MaybeWrittenError "maybe_written", FatalError
"fatal", RejectedRecords / RejectedRecord "rejected" with (index, reason) pairs. Rows are built as
the host builds them (payload fields + pico_* metadata). For an Arrow sink the rows become a
pyarrow.RecordBatch with pyarrow's own type inference (the runtime's exporter infers the same kinds
for plain JSON: int64, float64, bool, utf8; nested values become JSON text there, structs here).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Iterable

from ._dispatch import REJECTED, STATUS_NAMES, run_write
from ._planes import DataPlane, sink_data_plane_spec

METADATA_KEYS = ("pico_topic", "pico_partition", "pico_offset", "pico_timestamp", "pico_key", "pico_headers")


@dataclass
class Outcome:
    status: str  # ok | retry | maybe_written | fatal | rejected
    message: str = ""
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (index in the batch, reason)
    plane: DataPlane = DataPlane.PYTHON_ROWS


def make_rows(
    payloads: Iterable[Any],
    topic: str = "test",
    partition: int = 0,
    first_offset: int = 0,
    timestamp_ms: int | None = None,
    keys: Iterable[bytes | None] | None = None,
    headers: Iterable[tuple] | None = None,
) -> tuple[list[dict], list[tuple[int, str]]]:
    """Rows as the host plugin builds them from JSON records: a dict payload gives its fields, any
    other value (or None, a tombstone) is under "payload"; then the pico_* keys. Returns the rows
    and the records refused because a field collides with a metadata key."""
    payloads = list(payloads)
    keys = list(keys) if keys is not None else [None] * len(payloads)
    headers = list(headers) if headers is not None else [()] * len(payloads)
    rows, refused = [], []
    for i, p in enumerate(payloads):
        if isinstance(p, dict):
            clash = [k for k in METADATA_KEYS if k in p]
            if clash:
                refused.append((i, f"field '{clash[-1]}' collides with a metadata column"))
                continue
            row = dict(p)
        else:
            row = {"payload": p}
        row.update(
            pico_topic=topic,
            pico_partition=partition,
            pico_offset=first_offset + i,
            pico_timestamp=timestamp_ms,
            pico_key=keys[i],
            pico_headers=tuple(headers[i]),
        )
        rows.append(row)
    return rows, refused


class SinkTester:
    """Drives one sink instance on a private asyncio loop."""

    def __init__(self, sink):
        self.sink = sink
        self.spec = sink_data_plane_spec(sink)  # refuses what the runtime refuses
        self.plane = self.spec.best_plane
        self._loop = asyncio.new_event_loop()

    def run(self, coro):
        return self._loop.run_until_complete(coro)

    def open(self) -> None:
        self.run(self.sink.open())

    def close(self) -> None:
        try:
            self.run(self.sink.close())
        finally:
            self._loop.close()

    def __enter__(self) -> "SinkTester":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write(self, payloads: Iterable[Any], **metadata) -> Outcome:
        """Writes one batch (payload values, see make_rows for the metadata) and returns its outcome."""
        rows, refused = make_rows(payloads, **metadata)
        kept = [i for i in range(len(rows) + len(refused)) if i not in {r[0] for r in refused}]
        status, message, rejected = REJECTED, "", []
        if rows:
            data = rows
            if self.plane is DataPlane.ARROW_BATCHES:
                import pyarrow as pa

                data = pa.RecordBatch.from_pylist(rows)
            status, message, rejected = self.run(run_write(self.sink, self.plane, data))
            rejected = [(kept[i], r) for i, r in rejected]
        rejected = sorted(rejected + refused)
        if refused and STATUS_NAMES[status] == "ok":
            status = REJECTED
        return Outcome(STATUS_NAMES[status], message, rejected, self.plane)
