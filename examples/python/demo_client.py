"""A stand-in destination for the custom-sink spec's examples, which leave their client to the
reader (`connect()`, `self._client`). It appends one JSON line per record to the file named by the
environment variable DEMO_SINK_OUT (the runtime's environment reaches the sink), so a test can read
back what the sink wrote; without it, it counts only."""
from __future__ import annotations

import json
import os


def _plain(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, bytes):
            v = v.decode("utf-8", "backslashreplace")
        elif k == "pico_headers":  # a tuple of (name, value) in a row, a list of them from Arrow
            v = [[n, b.decode("utf-8", "backslashreplace") if isinstance(b, bytes) else b] for n, b in v]
        elif hasattr(v, "isoformat"):
            v = v.isoformat()
        out[k] = v
    return out


class DemoClient:
    def __init__(self, path: str | None):
        self._file = open(path, "a", encoding="utf-8") if path else None
        self.records = 0

    def _append(self, how: str, rows: list[dict]) -> None:
        self.records += len(rows)
        if self._file:
            for row in rows:
                self._file.write(json.dumps({"call": how, "row": _plain(row)}, sort_keys=True, default=repr) + "\n")
            self._file.flush()

    async def send(self, record: dict) -> None:
        self._append("send", [record])

    async def send_one(self, record: dict) -> None:
        self._append("send_one", [record])

    async def send_many(self, records: list[dict]) -> None:
        self._append("send_many", records)

    async def send_arrow(self, batch) -> None:
        self._append("send_arrow", batch.to_pylist())

    async def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None


async def connect() -> DemoClient:
    return DemoClient(os.environ.get("DEMO_SINK_OUT"))
