"""Counting Python sinks for bench/python_sinks.sh, one per plane: they only count what they get,
and write `records=<n>` to options["report"] on close."""
from picomq_connect import BaseSink, DataPlane


class _Counting(BaseSink[dict]):
    def __init__(self, **options):
        super().__init__(**options)
        self.records = 0

    async def close(self):
        with open(self.options["report"], "w") as f:
            f.write(f"records={self.records}\n")


class CountingRows(_Counting):
    async def write(self, record):
        self.records += 1


class CountingBatches(_Counting):
    accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.PYTHON_BATCHES)
    native_data_planes = accepted_data_planes

    async def write_batch(self, records):
        self.records += len(records)


class CountingArrow(_Counting):
    accepted_data_planes = (DataPlane.PYTHON_ROWS, DataPlane.ARROW_BATCHES)
    native_data_planes = (DataPlane.ARROW_BATCHES,)

    async def write_arrow_batch(self, batch):
        self.records += batch.num_rows
