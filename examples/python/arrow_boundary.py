# The custom-sink spec's "Arrow boundary support", verbatim below the line. The spec's class uses
# self._client without saying where it comes from; MyArrowSinkDemo (after the spec's code) opens
# the demo destination of demo_client.py and changes nothing else.
# Run it: [plugin_config] class = "arrow_boundary:MyArrowSinkDemo", python_path = ["examples/python"],
# virtualenv = a virtualenv with pyarrow.
from demo_client import connect

# ---------------------------------------------------------------- the spec, verbatim
import pyarrow as pa

from agora import BaseSink, DataPlane


class MyArrowSink(BaseSink[dict]):
    sink_name = "my_arrow_sink"
    accepted_data_planes = (
        DataPlane.PYTHON_ROWS,
        DataPlane.PYTHON_BATCHES,
        DataPlane.ARROW_BATCHES,
    )
    native_data_planes = accepted_data_planes

    async def write(self, record: dict) -> None:
        await self._client.send_one(record)

    async def write_batch(self, records: list[dict]) -> None:
        await self._client.send_many(records)

    async def write_arrow_batch(self, batch: pa.RecordBatch) -> None:
        await self._client.send_arrow(batch)

# ---------------------------------------------------------------- the client the spec leaves out


class MyArrowSinkDemo(MyArrowSink):
    async def open(self) -> None:
        self._client = await connect()

    async def close(self) -> None:
        await self._client.close()
