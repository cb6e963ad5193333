"""BaseSink: what a Python sink subclasses."""
from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from ._planes import DataPlane

T = TypeVar("T")


class BaseSink(Generic[T]):
    """A sink written in Python. Subclass it, name it (`sink_name`), and implement `write` (or
    `write_batch`, `write_arrow_batch` with the planes declared). All methods are coroutines and
    run on the runtime's one asyncio loop: await I/O, do not block.

    The sink's own options (the `[plugin_config.options]` table) arrive as keyword arguments and
    are kept in `self.options`."""

    sink_name: ClassVar[str] = ""
    accepted_data_planes: ClassVar[tuple[DataPlane, ...]] = (DataPlane.PYTHON_ROWS,)
    native_data_planes: ClassVar[tuple[DataPlane, ...]] = (DataPlane.PYTHON_ROWS,)

    def __init__(self, **options: Any) -> None:
        self.options: dict[str, Any] = dict(options)

    async def open(self) -> None:
        """Connect; called once before the first write."""

    async def write(self, record: T) -> None:
        """Write one record. The default hands it to write_batch()."""
        if type(self).write_batch is BaseSink.write_batch:
            raise NotImplementedError(f"{type(self).__qualname__} implements neither write() nor write_batch()")
        await self.write_batch([record])

    async def write_batch(self, records: list[T]) -> None:
        """Write records of one topic-partition, in offset order. The default writes them one by one."""
        for record in records:
            await self.write(record)

    async def write_arrow_batch(self, batch: Any) -> None:
        """Write one pyarrow.RecordBatch (pico_* metadata columns first, then the payload's)."""
        raise NotImplementedError(f"{type(self).__qualname__} does not implement write_arrow_batch()")

    async def close(self) -> None:
        """Flush and release everything; awaited at shutdown after every pending write completed."""
