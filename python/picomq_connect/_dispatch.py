"""How one write of a sink runs and what its outcome is: shared by the host plugin
(libpicomq_connector_python_sink, through _host) and by picomq_connect.testing."""
from __future__ import annotations

import asyncio

from ._planes import DataPlane
from .errors import FatalError, MaybeWrittenError, RejectedRecord, RejectedRecords

# pmq_write_status values (include/picomq/sink_abi.h)
OK, RETRY, PARTIAL, FATAL, REJECTED = 0, 1, 2, 3, 4
STATUS_NAMES = {OK: "ok", RETRY: "retry", PARTIAL: "maybe_written", FATAL: "fatal", REJECTED: "rejected"}


def describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _where(records, index: int) -> str:
    try:
        return f"record {index} (offset {records[index]['pico_offset']})"
    except Exception:
        return f"record {index}"


def _classify(e: BaseException, count: int, prefix: str = "") -> tuple[int, str, list]:
    if isinstance(e, RejectedRecords):
        bad = [(i, r) for i, r in e.rejected if not 0 <= i < count]
        if bad:
            return FATAL, f"{prefix}RejectedRecords names record {bad[0][0]}, but the batch has {count} records", []
        if not e.rejected:
            return FATAL, f"{prefix}RejectedRecords names no record", []
        return REJECTED, "", list(e.rejected)
    if isinstance(e, RejectedRecord):
        return FATAL, (f"{prefix}RejectedRecord raised for a whole batch ({describe(e)}); "
                       "name the refused records with RejectedRecords({index: reason})"), []
    if isinstance(e, FatalError):
        return FATAL, prefix + describe(e), []
    if isinstance(e, MaybeWrittenError):
        return PARTIAL, prefix + describe(e), []
    if isinstance(e, (Exception, asyncio.CancelledError)):
        return RETRY, prefix + describe(e), []
    return FATAL, prefix + describe(e), []  # SystemExit, KeyboardInterrupt, ...


async def run_write(sink, plane: DataPlane, data) -> tuple[int, str, list]:
    """Runs one write on `plane` and returns (status, message, [(index, reason)]). Never raises."""
    if plane is DataPlane.PYTHON_ROWS:
        rejected = []
        for i, row in enumerate(data):
            try:
                await sink.write(row)
            except RejectedRecord as r:
                rejected.append((i, r.reason))
            except BaseException as e:  # noqa: BLE001 - every outcome is reported, none escapes
                status, message, _ = _classify(e, len(data), _where(data, i) + ": ")
                if status == REJECTED:
                    status, message = FATAL, f"{_where(data, i)}: RejectedRecords raised from write(); raise RejectedRecord(reason)"
                # Records before this one were written: a retry writes them again.
                if status == RETRY and i > len(rejected):
                    status = PARTIAL
                return status, message, []
        return (REJECTED if rejected else OK), "", rejected
    try:
        if plane is DataPlane.PYTHON_BATCHES:
            await sink.write_batch(data)
        else:
            await sink.write_arrow_batch(data)
    except BaseException as e:  # noqa: BLE001
        return _classify(e, len(data))
    return OK, "", []
