"""Python sinks for sinks/python/tests/kafka_test.cpp. Each appends JSON lines to options["out"]
so the test reads back what it saw."""
import asyncio
import json
import time

from picomq_connect import BaseSink, DataPlane, FatalError, RejectedRecords, RetryableError


def _log(path, **fields):
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(fields, sort_keys=True) + "\n")


class Batches(BaseSink[dict]):
    accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES)
    native_data_planes = accepted_data_planes


class Outcomes(Batches):
    """options: out, mode (retry | fatal | reject | flaky), at (the offset that fails)."""

    async def open(self):
        self.attempts = {}

    async def write_batch(self, records):
        first, offsets = records[0]["pico_offset"], [r["pico_offset"] for r in records]
        self.attempts[first] = self.attempts.get(first, 0) + 1
        at, mode = self.options["at"], self.options["mode"]
        if at in offsets:
            if mode == "retry":
                _log(self.options["out"], first=first, status="retry")
                raise RetryableError(f"destination busy at offset {at}")
            if mode == "flaky" and self.attempts[first] <= 2:
                _log(self.options["out"], first=first, status="retry")
                raise ConnectionError("connection reset")
            if mode == "fatal":
                _log(self.options["out"], first=first, status="fatal")
                raise FatalError(f"table dropped at offset {at}")
            if mode == "reject":
                _log(self.options["out"], first=first, status="rejected", offsets=[o for o in offsets if o != at])
                raise RejectedRecords({offsets.index(at): f"offset {at} is too large for the destination"})
        _log(self.options["out"], first=first, status="ok", offsets=offsets)


class Overlap(Batches):
    """Every write sleeps `delay` seconds (the first one `first_delay`); logs start and end."""

    async def write_batch(self, records):
        first = records[0]["pico_offset"]
        _log(self.options["out"], event="start", first=first, at=time.monotonic())
        await asyncio.sleep(self.options["first_delay"] if first == 0 else self.options["delay"])
        _log(self.options["out"], event="end", first=first, offsets=[r["pico_offset"] for r in records], at=time.monotonic())

    async def close(self):
        _log(self.options["out"], event="close", at=time.monotonic())


class HangingClose(Batches):
    async def write_batch(self, records):
        _log(self.options["out"], event="written", count=len(records))

    async def close(self):
        _log(self.options["out"], event="closing")
        await asyncio.sleep(3600)


class CpuBound(Batches):
    """Holds the GIL: a pure-Python loop for `seconds` in its first write, then writes normally."""

    async def open(self):
        self.burnt = False

    async def write_batch(self, records):
        if not self.burnt:
            self.burnt = True
            _log(self.options["out"], event="burning")
            end, spins = time.monotonic() + self.options["seconds"], 0
            while time.monotonic() < end:
                spins += 1
            _log(self.options["out"], event="burnt", spins=spins)
        for r in records:
            _log(self.options["out"], event="row", offset=r["pico_offset"])


class Legacy(BaseSink[dict]):
    supports_arrow = True

    async def write(self, record):
        pass


class UnimplementedArrow(BaseSink[dict]):
    accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.ARROW_BATCHES)
    native_data_planes = accepted_data_planes

    async def write(self, record):
        pass


class NotAccepted(BaseSink[dict]):
    native_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES)

    async def write_batch(self, records):
        pass


class Record(Batches):
    """Logs every row it gets (bytes and tuples as text)."""

    async def write_batch(self, records):
        for r in records:
            _log(self.options["out"], row={k: (v if isinstance(v, (int, float, str, list, dict, type(None))) else repr(v))
                                           for k, v in r.items()})


class ArrowCheck(BaseSink[dict]):
    """Logs, per Arrow batch, its size and what pyarrow's memory pool holds meanwhile: 0 when the
    batch was imported without a copy (its buffers are the runtime exporter's)."""

    accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.ARROW_BATCHES)
    native_data_planes = (DataPlane.ARROW_BATCHES,)

    async def write_arrow_batch(self, batch):
        import pyarrow as pa

        _log(self.options["out"], rows=batch.num_rows, nbytes=batch.nbytes, pool_bytes=pa.total_allocated_bytes(),
             columns=batch.schema.names)
