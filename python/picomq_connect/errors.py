"""Exceptions a sink raises to say what happened to a write; the runtime acts on each.

| raised from write / write_batch / write_arrow_batch | outcome | the runtime |
|---|---|---|
| nothing | ok | commits the offset past the records |
| RetryableError, or any other Exception | retry | nothing committed; the same records again (5 attempts, backoff) |
| MaybeWrittenError | maybe written (partial) | retried like retry: make writes idempotent |
| FatalError | fatal | the sink stops in Error, offset held |
| RejectedRecords / RejectedRecord | rejected | the named records go to the bad-record policy, the rest is committed |
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping


class SinkError(Exception):
    """Base of the outcome exceptions."""


class RetryableError(SinkError):
    """Nothing was written; the same records may be written again."""


class MaybeWrittenError(SinkError):
    """Some records may have been written; a retry relies on the sink being idempotent."""


class FatalError(SinkError):
    """Retrying cannot help (bad credentials, a missing table): the sink stops in Error."""


class RejectedRecord(SinkError):
    """Raised from write(record): the destination refused this record, for `reason`. The other
    records of the batch are still written."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RejectedRecords(SinkError):
    """Raised from write_batch / write_arrow_batch: these records (by index in the batch) were
    refused, each for its reason; every other record was written.

    rejected: {index: reason} or an iterable of (index, reason)."""

    def __init__(self, rejected: Mapping[int, str] | Iterable[tuple[int, str]], message: str = ""):
        items = rejected.items() if isinstance(rejected, Mapping) else rejected
        self.rejected: list[tuple[int, str]] = [(int(i), str(r)) for i, r in items]
        super().__init__(message or f"{len(self.rejected)} record(s) rejected")
